! Every call form of the Fortran bindings (use mpi) the interposition library
! records, each in its own phase (MPI_Pcontrol(k) records into "pcontrol-k")
! with a byte count no other form uses.  Run under
! `python -m rankmap.profile --collectives root` on 2 or more ranks.  Each
! rank writes what it must have been recorded with to ARG1.RANK, one row per
! line: phase kind src dst bytes messages.
program callforms
  use mpi
  implicit none
  integer :: me, n, right, left, phase, ierr, i, q, root, s_rank, s_size, sub, cart, win, vec
  integer :: rq(4), st(MPI_STATUS_SIZE), counts(0:255), displs(0:255), rcounts(0:255), rdispls(0:255)
  integer :: dims(1), src, dst, bsize
  logical :: periods(1)
  integer(kind=1) :: sbuf(65536), rbuf(65536)
  integer(kind=1), allocatable :: bspace(:)
  integer(kind=MPI_ADDRESS_KIND) :: winsize, disp
  character(len=4096) :: prefix, fname
  integer, parameter :: out = 17
  integer :: members(0:255), k

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  right = mod(me + 1, n)
  left = mod(me + n - 1, n)
  call get_command_argument(1, prefix)
  write (fname, '(A,".",I0)') trim(prefix), me
  open (unit=out, file=trim(fname), status='replace', action='write')
  sbuf = 1

  ! blocking, synchronous, ready, buffered, nonblocking
  call begin(2); call post(24); call MPI_Send(sbuf, 3, MPI_DOUBLE_PRECISION, right, 2, MPI_COMM_WORLD, ierr)
  call done(); call sent('p2p', right, 24, 1); call finish()
  call begin(3); call post(20); call MPI_Ssend(sbuf, 5, MPI_INTEGER, right, 3, MPI_COMM_WORLD, ierr)
  call done(); call sent('p2p', right, 20, 1); call finish()
  call begin(4); call post(7); call MPI_Rsend(sbuf, 7, MPI_BYTE, right, 4, MPI_COMM_WORLD, ierr)
  call done(); call sent('p2p', right, 7, 1); call finish()
  bsize = 65536
  allocate (bspace(bsize))
  call MPI_Buffer_attach(bspace, bsize, ierr)
  call begin(5); call post(36); call MPI_Bsend(sbuf, 9, MPI_REAL, right, 5, MPI_COMM_WORLD, ierr)
  call done(); call sent('p2p', right, 36, 1); call finish()
  call begin(6); call post(44); call MPI_Isend(sbuf, 11, MPI_INTEGER, right, 6, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Wait(rq(2), st, ierr); call done(); call sent('p2p', right, 44, 1); call finish()
  call begin(7); call post(13); call MPI_Issend(sbuf, 13, MPI_BYTE, right, 7, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Wait(rq(2), st, ierr); call done(); call sent('p2p', right, 13, 1); call finish()
  call begin(8); call post(60); call MPI_Irsend(sbuf, 15, MPI_INTEGER, right, 8, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Wait(rq(2), st, ierr); call done(); call sent('p2p', right, 60, 1); call finish()

  ! persistent: counted at each start
  call begin(9)
  call MPI_Send_init(sbuf, 19, MPI_BYTE, right, 9, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Recv_init(rbuf, 19, MPI_BYTE, left, 9, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Ssend_init(sbuf, 21, MPI_BYTE, right, 10, MPI_COMM_WORLD, rq(3), ierr)
  call MPI_Recv_init(rbuf(101), 21, MPI_BYTE, left, 10, MPI_COMM_WORLD, rq(4), ierr)
  do i = 1, 3
    call MPI_Start(rq(2), ierr); call MPI_Start(rq(1), ierr)
    call MPI_Waitall(2, rq(1:2), MPI_STATUSES_IGNORE, ierr)
  end do
  do i = 1, 2
    call MPI_Startall(2, rq(3:4), ierr)
    call MPI_Waitall(2, rq(3:4), MPI_STATUSES_IGNORE, ierr)
  end do
  do i = 1, 4
    call MPI_Request_free(rq(i), ierr)
  end do
  call sent('p2p', right, 3 * 19 + 2 * 21, 5); call finish()

  call begin(10)
  call MPI_Sendrecv(sbuf, 23, MPI_BYTE, right, 10, rbuf, 23, MPI_BYTE, left, 10, MPI_COMM_WORLD, st, ierr)
  call MPI_Sendrecv_replace(rbuf, 25, MPI_INTEGER, right, 11, left, 11, MPI_COMM_WORLD, st, ierr)
  call sent('p2p', right, 23 + 100, 2); call finish()

  ! a derived datatype counts its data: 2 x (4 blocks of 3 doubles)
  call MPI_Type_vector(4, 3, 5, MPI_DOUBLE_PRECISION, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  call begin(11)
  call MPI_Irecv(rbuf, 2, vec, left, 11, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Send(sbuf, 2, vec, right, 11, MPI_COMM_WORLD, ierr)
  call MPI_Wait(rq(1), st, ierr)
  call sent('p2p', right, 192, 1); call finish()
  call MPI_Type_free(vec, ierr)

  ! communicators: ranks translated to COMM_WORLD
  call begin(12)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), -me, sub, ierr)
  call MPI_Comm_rank(sub, s_rank, ierr)
  call MPI_Comm_size(sub, s_size, ierr)
  k = 0
  do q = n - 1, 0, -1
    if (mod(q, 2) == mod(me, 2)) then
      members(k) = q
      k = k + 1
    end if
  end do
  call MPI_Sendrecv(sbuf, 27, MPI_BYTE, mod(s_rank + 1, s_size), 12, rbuf, 27, MPI_BYTE, &
                    mod(s_rank + s_size - 1, s_size), 12, sub, st, ierr)
  call MPI_Comm_free(sub, ierr)
  call sent('p2p', members(mod(s_rank + 1, s_size)), 27, 1); call finish()

  call begin(13)
  dims(1) = n
  periods(1) = .true.
  call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, .false., cart, ierr)
  call MPI_Cart_shift(cart, 0, 1, src, dst, ierr)
  call MPI_Sendrecv(sbuf, 29, MPI_BYTE, dst, 13, rbuf, 29, MPI_BYTE, src, 13, cart, st, ierr)
  call sent('p2p', right, 29, 1); call finish()
  call begin(14)   ! neighbourhood collectives name their peers: left, then right
  call MPI_Neighbor_allgather(sbuf, 31, MPI_BYTE, rbuf, 31, MPI_BYTE, cart, ierr)
  if (n > 2) then
    call sent('collective', left, 31, 1); call sent('collective', right, 31, 1)
  else
    call sent('collective', right, 62, 2)
  end if
  call finish()
  call MPI_Comm_free(cart, ierr)

  ! collectives under the root model
  root = mod(1, n)
  call begin(15); call MPI_Bcast(sbuf, 35, MPI_DOUBLE_PRECISION, root, MPI_COMM_WORLD, ierr)
  if (me == root) then
    do q = 0, n - 1
      call sent('collective', q, 280, 1)
    end do
  end if
  call finish()
  call begin(16); call MPI_Allreduce(MPI_IN_PLACE, rbuf, 37, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call to_root_and_back(148); call finish()
  call begin(17); call MPI_Gather(sbuf, 39, MPI_BYTE, rbuf, 39, MPI_BYTE, 0, MPI_COMM_WORLD, ierr)
  if (me /= 0) call sent('collective', 0, 39, 1)
  call finish()
  displs(0) = 0
  do q = 0, n - 1
    counts(q) = q + 41
    if (q > 0) displs(q) = displs(q - 1) + counts(q - 1)
  end do
  call begin(18)
  call MPI_Scatterv(sbuf, counts, displs, MPI_BYTE, rbuf, me + 41, MPI_BYTE, 0, MPI_COMM_WORLD, ierr)
  if (me == 0) then
    do q = 1, n - 1
      call sent('collective', q, q + 41, 1)
    end do
  end if
  call finish()
  call begin(19); call MPI_Alltoall(sbuf, 43, MPI_BYTE, rbuf, 43, MPI_BYTE, MPI_COMM_WORLD, ierr)
  do q = 0, n - 1
    call sent('collective', q, 43, 1)
  end do
  call finish()
  displs(0) = 0
  rdispls(0) = 0
  do q = 0, n - 1
    counts(q) = q + 45
    rcounts(q) = me + 45
    if (q > 0) displs(q) = displs(q - 1) + counts(q - 1)
    if (q > 0) rdispls(q) = rdispls(q - 1) + rcounts(q - 1)
  end do
  call begin(20)
  call MPI_Alltoallv(sbuf, counts, displs, MPI_INTEGER, rbuf, rcounts, rdispls, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do q = 0, n - 1
    call sent('collective', q, 4 * (q + 45), 1)
  end do
  call finish()
  rdispls(0) = 0
  do q = 0, n - 1
    counts(q) = 999
    displs(q) = 0
    rcounts(q) = me + q + 51
    if (q > 0) rdispls(q) = rdispls(q - 1) + rcounts(q - 1)
  end do
  call begin(24)   ! in place: what goes to q is what comes from q; the send counts are not read
  call MPI_Alltoallv(MPI_IN_PLACE, counts, displs, MPI_DOUBLE_PRECISION, rbuf, rcounts, rdispls, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  do q = 0, n - 1
    call sent('collective', q, 4 * (me + q + 51), 1)
  end do
  call finish()
  call begin(21); call MPI_Scan(sbuf, rbuf, 49, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (me + 1 < n) call sent('collective', me + 1, 196, 1)
  call finish()
  call begin(22)
  call MPI_Iallreduce(sbuf, rbuf, 51, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), st, ierr)
  call to_root_and_back(204); call finish()

  ! one-sided: a Get counts as traffic from the target
  winsize = 65536
  call MPI_Win_create(rbuf, winsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  disp = 0
  call begin(23)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Put(sbuf, 59, MPI_BYTE, right, disp, 59, MPI_BYTE, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Get(sbuf(2001), 61, MPI_BYTE, left, disp, 61, MPI_BYTE, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call sent('rma', right, 59, 1)
  call row('rma', left, me, 61, 1)
  call finish()
  call MPI_Win_free(win, ierr)

  ! paused: nothing recorded
  call MPI_Pcontrol(0)
  call MPI_Sendrecv(sbuf, 1000, MPI_BYTE, right, 29, rbuf, 1000, MPI_BYTE, left, 29, MPI_COMM_WORLD, st, ierr)
  call MPI_Pcontrol(1)

  call MPI_Buffer_detach(bspace, bsize, ierr)
  close (out)
  write (*, '("rank ",I0,": ok")') me
  call MPI_Finalize(ierr)

contains

  subroutine row(kind, from, to, bytes, msgs)
    character(len=*), intent(in) :: kind
    integer, intent(in) :: from, to, bytes, msgs
    if (from /= to .and. bytes /= 0) &
      write (out, '("pcontrol-",I0,1X,A,4(1X,I0))') phase, kind, from, to, bytes, msgs
  end subroutine

  subroutine sent(kind, to, bytes, msgs)
    character(len=*), intent(in) :: kind
    integer, intent(in) :: to, bytes, msgs
    call row(kind, me, to, bytes, msgs)
  end subroutine

  subroutine to_root_and_back(bytes)   ! the root model of an allreduce
    integer, intent(in) :: bytes
    integer :: p
    if (me /= 0) then
      call sent('collective', 0, bytes, 1)
    else
      do p = 1, n - 1
        call sent('collective', p, bytes, 1)
      end do
    end if
  end subroutine

  subroutine begin(k)   ! from "main"
    integer, intent(in) :: k
    phase = k
    call MPI_Pcontrol(k)
  end subroutine

  subroutine finish()   ! back to "main"
    call MPI_Pcontrol(1)
  end subroutine

  subroutine post(bytes)   ! the receive from the left, so a ready send to the right is legal
    integer, intent(in) :: bytes
    call MPI_Irecv(rbuf, bytes, MPI_BYTE, left, phase, MPI_COMM_WORLD, rq(1), ierr)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end subroutine

  subroutine done()
    call MPI_Wait(rq(1), st, ierr)
  end subroutine
end program
