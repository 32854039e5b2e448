! tests/mpi_programs/event_order.c in Fortran (use mpi), call for call: the
! same peers, tags, sizes and order, so its event log must equal the mpi4py
! twin's (tests/mpi_scripts/event_order.py) on every rank.  Without MPI-4's
! Isendrecv (`use mpi` of an MPI-3 library has no MPI_ISENDRECV to link):
! the twin leaves it out unless told.  An even number of ranks.
program event_order
  use mpi
  implicit none
  integer :: me, n, right, left, across, ierr, it, d, k, lo, hi, idx, outcount, q
  integer :: dims(2), r(8), p(2), both(2), indices(2), statuses(MPI_STATUS_SIZE, 2)
  integer :: grid, sub, inter, sub_rank, root, bsize
  integer :: counts(0:63), displs(0:63)
  logical :: periods(2), flag
  integer(kind=1) :: inb(4096), outb(4096)
  integer(kind=1), allocatable :: bspace(:)
  double precision :: v(8), w(64), a(192), b(192)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  if (mod(n, 2) /= 0) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  right = mod(me + 1, n)
  left = mod(me + n - 1, n)
  across = mod(me + n / 2, n)
  outb = 0

  do it = 1, 3   ! ring pipeline
    call MPI_Irecv(inb, 80, MPI_BYTE, left, 1, MPI_COMM_WORLD, r(1), ierr)
    call MPI_Isend(outb, 80, MPI_BYTE, right, 1, MPI_COMM_WORLD, r(2), ierr)
    call MPI_Waitall(2, r, MPI_STATUSES_IGNORE, ierr)
  end do
  if (me > 0) call MPI_Recv(inb, 3, MPI_DOUBLE_PRECISION, me - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  if (me < n - 1) call MPI_Send(outb, 3, MPI_DOUBLE_PRECISION, me + 1, 2, MPI_COMM_WORLD, ierr)

  dims = 0   ! halo
  periods = (/ .false., .true. /)
  call MPI_Dims_create(n, 2, dims, ierr)
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., grid, ierr)
  k = 1
  do d = 0, 1
    call MPI_Cart_shift(grid, d, 1, lo, hi, ierr)
    call MPI_Irecv(inb, 48, MPI_BYTE, lo, 3, grid, r(k), ierr)
    call MPI_Irecv(inb(49), 48, MPI_BYTE, hi, 3, grid, r(k + 1), ierr)
    call MPI_Isend(outb, 48, MPI_BYTE, hi, 3, grid, r(k + 2), ierr)
    call MPI_Isend(outb(49), 48, MPI_BYTE, lo, 3, grid, r(k + 3), ierr)
    k = k + 4
  end do
  call MPI_Waitall(8, r, MPI_STATUSES_IGNORE, ierr)

  call MPI_Sendrecv(outb, 16, MPI_BYTE, left, 4, inb, 16, MPI_BYTE, right, 4, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)

  call MPI_Irecv(inb, 40, MPI_BYTE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, r(1), ierr)   ! only `across` sends tag 5
  call MPI_Send(outb, 32, MPI_BYTE, across, 5, MPI_COMM_WORLD, ierr)
  call MPI_Wait(r(1), MPI_STATUS_IGNORE, ierr)
  if (mod(me, 2) == 0) then
    call MPI_Recv(inb, 8, MPI_BYTE, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Send(outb, 8, MPI_BYTE, me - 1, 6, MPI_COMM_WORLD, ierr)
  end if

  call MPI_Send_init(outb, 8, MPI_BYTE, right, 7, MPI_COMM_WORLD, p(1), ierr)   ! persistent
  call MPI_Recv_init(inb, 8, MPI_BYTE, left, 7, MPI_COMM_WORLD, p(2), ierr)
  do it = 1, 2
    both = (/ p(2), p(1) /)
    call MPI_Startall(2, both, ierr)
    call MPI_Waitall(2, p, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Request_free(p(1), ierr)
  call MPI_Request_free(p(2), ierr)

  ! Waitany, then Waitsome: the right neighbour sends tag 9 (12) only once
  ! it has this rank's "go" (tag 10, 13), sent after the first completion
  call MPI_Irecv(inb, 16, MPI_BYTE, right, 9, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Irecv(inb(17), 24, MPI_BYTE, left, 8, MPI_COMM_WORLD, r(2), ierr)
  call MPI_Send(outb, 8, MPI_BYTE, right, 8, MPI_COMM_WORLD, ierr)
  call MPI_Waitany(2, r, idx, MPI_STATUS_IGNORE, ierr)
  call MPI_Send(outb, 1, MPI_BYTE, right, 10, MPI_COMM_WORLD, ierr)
  call MPI_Recv(inb, 1, MPI_BYTE, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Send(outb, 16, MPI_BYTE, left, 9, MPI_COMM_WORLD, ierr)
  call MPI_Waitany(2, r, idx, MPI_STATUS_IGNORE, ierr)
  call MPI_Irecv(inb, 16, MPI_BYTE, right, 12, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Irecv(inb(17), 24, MPI_BYTE, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, r(2), ierr)
  call MPI_Send(outb, 8, MPI_BYTE, right, 11, MPI_COMM_WORLD, ierr)
  call MPI_Waitsome(2, r, outcount, indices, statuses, ierr)
  call MPI_Send(outb, 1, MPI_BYTE, right, 13, MPI_COMM_WORLD, ierr)
  call MPI_Recv(inb, 1, MPI_BYTE, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Send(outb, 16, MPI_BYTE, left, 12, MPI_COMM_WORLD, ierr)
  call MPI_Waitsome(2, r, outcount, indices, statuses, ierr)

  call MPI_Irecv(inb, 8, MPI_BYTE, left, 14, MPI_COMM_WORLD, r(1), ierr)   ! Test, Testall, Testany
  call MPI_Send(outb, 8, MPI_BYTE, right, 14, MPI_COMM_WORLD, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(r(1), flag, MPI_STATUS_IGNORE, ierr)
  end do
  call MPI_Isend(outb, 8, MPI_BYTE, right, 15, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Irecv(inb, 8, MPI_BYTE, left, 15, MPI_COMM_WORLD, r(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(2, r, flag, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Irecv(inb, 40, MPI_BYTE, MPI_ANY_SOURCE, 16, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Send(outb, 24, MPI_BYTE, across, 16, MPI_COMM_WORLD, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testany(1, r, idx, flag, MPI_STATUS_IGNORE, ierr)
  end do

  bsize = 65536   ! buffered: completes locally
  allocate (bspace(bsize))
  call MPI_Buffer_attach(bspace, bsize, ierr)
  call MPI_Bsend(outb, 8, MPI_BYTE, right, 17, MPI_COMM_WORLD, ierr)
  call MPI_Recv(inb, 8, MPI_BYTE, left, 17, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Buffer_detach(bspace, bsize, ierr)

  call MPI_Pcontrol(0)   ! paused: nothing logged
  call MPI_Sendrecv(outb, 1000, MPI_BYTE, right, 19, inb, 1000, MPI_BYTE, left, 19, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Pcontrol(1)

  v = (/ 1d0, 2d0, 3d0, 4d0, 5d0, 6d0, 7d0, 8d0 /)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), me, sub, ierr)
  call MPI_Allreduce(v, w, 1, MPI_DOUBLE_PRECISION, MPI_SUM, sub, ierr)
  call MPI_Barrier(sub, ierr)
  call MPI_Bcast(outb, 64, MPI_BYTE, 0, MPI_COMM_WORLD, ierr)
  call MPI_Reduce(v, w, 2, MPI_DOUBLE_PRECISION, MPI_SUM, 1, MPI_COMM_WORLD, ierr)
  call MPI_Allgather(v, 1, MPI_DOUBLE_PRECISION, w, 1, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call MPI_Scatter(w, 1, MPI_DOUBLE_PRECISION, v, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call MPI_Gather(v, 1, MPI_DOUBLE_PRECISION, w, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  do q = 0, n - 1
    counts(q) = mod(me + q, 3)
    displs(q) = 3 * q
  end do
  a = 0
  call MPI_Alltoallv(a, counts, displs, MPI_DOUBLE_PRECISION, b, counts, displs, MPI_DOUBLE_PRECISION, &
                     MPI_COMM_WORLD, ierr)
  call MPI_Neighbor_alltoall(v, 1, MPI_DOUBLE_PRECISION, w, 1, MPI_DOUBLE_PRECISION, grid, ierr)
  call MPI_Intercomm_create(sub, 0, MPI_COMM_WORLD, 1 - mod(me, 2), 20, inter, ierr)
  call MPI_Comm_rank(sub, sub_rank, ierr)
  if (mod(me, 2) == 1) then
    root = 0
  else if (sub_rank == 0) then
    root = MPI_ROOT
  else
    root = MPI_PROC_NULL
  end if
  call MPI_Bcast(outb, 24, MPI_BYTE, root, inter, ierr)
  call MPI_Iallreduce(v, w, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Wait(r(1), MPI_STATUS_IGNORE, ierr)

  call MPI_Comm_free(inter, ierr)
  call MPI_Comm_free(sub, ierr)
  call MPI_Comm_free(grid, ierr)
  write (*, '(A,I0,A)') 'event_order: rank ', me, ': ok'
  call MPI_Finalize(ierr)
end program event_order
