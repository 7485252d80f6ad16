"""Starts one process per rank for the PyTorch DDP sides of the
*_vs_pytorch benchmarks (tools/bench/ddp_vs_pytorch.py, gpt_vs_pytorch.py):
a free loopback port for the gloo rendezvous, then torch.multiprocessing.spawn
of run(rank, world, args, port) in `world` processes, joined."""
import socket

import torch.multiprocessing as mp


def spawn_ranks(run, world, args):
    with socket.socket() as s:  # a free port for the gloo rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(world, args, port), nprocs=world, join=True)
