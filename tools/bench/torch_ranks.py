"""Starts one process per rank for the PyTorch DDP sides of the
*_vs_pytorch benchmarks (tools/bench/ddp_vs_pytorch.py, gpt_vs_pytorch.py):
a free loopback port for the gloo rendezvous, then torch.multiprocessing.spawn
of run(rank, world, args, port) in `world` processes, joined; leave(dist)
ends a rank's process group once its numbers are out."""
import os
import socket
import threading

import torch.multiprocessing as mp


def spawn_ranks(run, world, args):
    with socket.socket() as s:  # a free port for the gloo rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(world, args, port), nprocs=world, join=True)


def leave(dist, deadline_s=30):
    """dist.destroy_process_group(), but a rank still in gloo's teardown
    after deadline_s leaves without it: at world 4 one rank has hung there,
    polling in the kernel after its result was printed, and the driver's
    timeout then lost the whole run."""
    timer = threading.Timer(deadline_s, lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    dist.destroy_process_group()
    timer.cancel()
