#!/usr/bin/env python3
"""tandem_order.py (gpt_vs_pytorch.py --same_batches) against the C++ it
reproduces, through tandem_order_dump: the epoch permutation
(common/data/sampler.cc), InitRng's normals (common/nn/init.h) and the
order, sizes and stddevs of GptModel::Initialize's draws."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tandem_order  # noqa: E402

DUMP = os.path.join(HERE, "tandem_order_dump")


def dump(*args):
    return subprocess.run([DUMP] + [str(a) for a in args], check=True,
                          capture_output=True, text=True).stdout


class PermutationTest(unittest.TestCase):
    def test_matches_cpp(self):
        # Small, odd and large sizes; seeds and epochs whose mixing differs.
        for n, seed, epoch in [(1, 1, 0), (2, 1, 0), (7, 3, 1), (1000, 1, 0), (1000, 1, 1),
                               (1000, 2, 0), (37813, 1, 0), (12345, 2 ** 40 + 7, 5)]:
            with self.subTest(n=n, seed=seed, epoch=epoch):
                cpp = [int(v) for v in dump("perm", n, seed, epoch).split()]
                self.assertEqual(tandem_order.epoch_permutation(n, seed, epoch), cpp)

    def test_rank_batches_partition_each_global_batch(self):
        n, seed, world, per_rank = 1000, 3, 3, 5
        gb = world * per_rank
        ranks = [tandem_order.rank_batches(n, seed, gb, world, r, 70) for r in range(world)]
        perm0 = tandem_order.epoch_permutation(n, seed, 0)
        perm1 = tandem_order.epoch_permutation(n, seed, 1)
        per_epoch = n // gb  # 66: step 66 is the next epoch's first batch
        for step in (0, 1, per_epoch - 1, per_epoch, per_epoch + 3):
            got = sum((ranks[r][step] for r in range(world)), [])
            perm, s = (perm0, step) if step < per_epoch else (perm1, step - per_epoch)
            self.assertEqual(got, perm[s * gb:(s + 1) * gb])

    def test_uneven_rank_slices(self):
        # 10 over 4 ranks: 3, 3, 2, 2 (the first B mod w ranks one more).
        self.assertEqual([tandem_order.rank_slice(10, 4, r) for r in range(4)],
                         [(0, 3), (3, 6), (6, 8), (8, 10)])


class InitTest(unittest.TestCase):
    def test_normals_match_cpp(self):
        for seed in (0, 1, 7):
            cpp = [tandem_order.f32(float(v)) for v in dump("normals", seed, 500).split()]
            py = [tandem_order.f32(v) for v in tandem_order.init_normals(seed, 500, tandem_order.f32(0.02))]
            self.assertEqual(py, cpp)

    def test_skip_continues_the_stream(self):
        whole = tandem_order.init_normals(5, 30)
        self.assertEqual(tandem_order.init_normals(5, 10, skip=20), whole[20:])

    def test_gpt_plan_matches_initialize(self):
        layers, width, ctx, seed = 2, 16, 8, 3
        rows = [line.split() for line in
                dump("gpt", f"gpt:layers={layers},width={width},heads=2,context={ctx}", seed).splitlines()]
        f = lambda v: tandem_order.f32(float(v))  # noqa: E731 (%.9g round-trips float32)
        cpp = {name: (int(size), f(first), f(last)) for name, size, first, last in rows}
        by_torch = {tandem_order.torch_name(n): n for n in cpp}
        self.assertEqual(len(by_torch), len(cpp))
        skip, drawn = 0, set()
        for name, count, std in tandem_order.gpt_init_plan(layers, width, ctx):
            tname = by_torch[name]
            size, first, last = cpp[tname]
            self.assertEqual(size, count, tname)
            values = tandem_order.init_normals(seed, count, std, skip)
            self.assertEqual((tandem_order.f32(values[0]), tandem_order.f32(values[-1])),
                             (first, last), tname)
            skip += count
            drawn.add(tname)
        for tname, (size, first, last) in cpp.items():
            if tname not in drawn:  # biases 0, LayerNorm gains 1
                gain = (".ln" in tname or tname.startswith("ln_")) and tname.endswith("weight")
                want = 1.0 if gain else 0.0
                self.assertEqual((first, last), (want, want), tname)


if __name__ == "__main__":
    unittest.main()
