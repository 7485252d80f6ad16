"""Starts one process per rank for the PyTorch DDP sides of the
*_vs_pytorch benchmarks (tools/bench/ddp_vs_pytorch.py, gpt_vs_pytorch.py):
a free loopback port for the gloo rendezvous, then torch.multiprocessing.spawn
of run(rank, world, args, port) in `world` processes, joined; leave(dist)
ends a rank once its numbers are out."""
import datetime
import os
import socket
import sys

import torch.multiprocessing as mp


def spawn_ranks(run, world, args):
    with socket.socket() as s:  # a free port for the gloo rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(world, args, port), nprocs=world, join=True)


def leave(dist, deadline_s=60):
    """Ends this rank's process (exit status 0) once its numbers are out,
    without tearing gloo down: a monitored barrier (at most deadline_s)
    first, so no rank closes its sockets while a peer still reads from them,
    then os._exit.

    Why not dist.destroy_process_group(): it only drops c10d's own reference
    to the group. DistributedDataParallel (and its reducer) hold others, so
    the gloo group was really destroyed later, when run() returned or the
    interpreter exited, after the old 30 s deadline timer had already been
    cancelled; that is where a rank was seen spinning for minutes, polling
    its sockets, while its peers had exited. A Python timer could not have
    cut it short either: the C++ destructor runs holding the GIL, which the
    timer thread needs to fire. Nothing of gloo's runs after the barrier
    now; the kernel closes the sockets."""
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=deadline_s))
    except RuntimeError as e:  # a peer died or overran: the numbers are out anyway
        print(f"rank {dist.get_rank()}: leaving without the other ranks ({e})",
              file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
