"""Linear and integer programs through HiGHS's own Python binding, highspy.

The exact splits (``exact_groups``) solve small set-partitioning programs.
scipy's ``linprog`` and ``milp`` wrap the same solver, but importing
``scipy.optimize`` costs more than a small mapping's whole search; highspy
loads in a hundredth of that.  The model is passed as scipy passes it (rows
in the given order, the same options), so the solver sees the same program.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ...deadline import Deadline


class Solution(NamedTuple):
    """What a solve found: ``x`` is None when it found no solution;
    ``optimal`` when proven so; ``row_dual`` the rows' duals (an LP's);
    ``dual_bound`` the branch and bound's bound on the objective (a MIP's)."""
    optimal: bool
    x: np.ndarray | None
    objective: float
    row_dual: np.ndarray | None
    dual_bound: float


def solve(cost: np.ndarray, rows: sp.spmatrix, row_lower: np.ndarray, row_upper: np.ndarray, *,
          col_upper: float = np.inf, integer: bool = False, node_limit: int | None = None,
          deadline: Deadline | None = None) -> Solution:
    """Minimise ``cost @ x`` subject to ``row_lower <= rows @ x <= row_upper``
    and ``0 <= x <= col_upper``, every x integral when ``integer``: without
    presolve (on these programs it took longer than the solve), an LP by the
    dual simplex method, a MIP by branch and bound of at most ``node_limit``
    nodes; within what ``deadline`` has left."""
    import highspy  # only where a program is solved

    matrix = sp.csc_array(rows)
    n = cost.size
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, matrix.shape[0]
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.full(n, col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, matrix.shape[0]
    lp.a_matrix_.start_ = matrix.indptr
    lp.a_matrix_.index_ = matrix.indices
    lp.a_matrix_.value_ = matrix.data.astype(np.float64)
    if integer:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    # the binding's plain solver class: the modelling class ``Highs`` prints
    # a banner on standard output when it is made, before any option holds
    highs = highspy._Highs()
    options = {"output_flag": False, "presolve": "off"}  # presolve: 9x the branch and bound on 35k pieces
    if integer and node_limit is not None:
        options["mip_max_nodes"] = int(node_limit)
    if not integer:
        options["solver"], options["simplex_strategy"] = "simplex", 1  # dual: 0.7-0.9x HiGHS's own choice here
    if deadline is not None and deadline.end is not None:
        options["time_limit"] = max(deadline.remaining(), 1e-3)
    for key, value in options.items():
        highs.setOptionValue(key, value)
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus()
    info = highs.getInfo()
    optimal = status == highspy.HighsModelStatus.kOptimal
    stopped = status in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kIterationLimit,
                         highspy.HighsModelStatus.kSolutionLimit)
    found = optimal or (integer and stopped and info.objective_function_value != highspy.kHighsInf)
    if not found:
        return Solution(False, None, np.inf, None, -np.inf)
    solution = highs.getSolution()
    return Solution(optimal, np.array(solution.col_value), float(info.objective_function_value),
                    None if integer else np.array(solution.row_dual),
                    float(info.mip_dual_bound) if integer else float(info.objective_function_value))
