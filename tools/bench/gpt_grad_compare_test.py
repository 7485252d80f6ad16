#!/usr/bin/env python3
"""tandem's GPT (gpt_step_dump) and gpt_vs_pytorch.py's PyTorch GPT give the
same loss and the same gradient for every parameter on the same weights and
windows: tandem's initial weights for a seed (the weight mapping of
--same_batches) and perturbed ones (biases and LayerNorm gains away from 0
and 1), on the OpenBLAS attention path (head size 8) and the causal-kernel
one (head size 16). Skips where torch is not installed."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import torch
except ImportError:
    torch = None

DUMP = os.path.join(HERE, "gpt_step_dump")
LOSS_TOL = 2e-5  # float32 sums over a few thousand terms
GRAD_TOL = 2e-4  # of the parameter's largest |gradient|


@unittest.skipIf(torch is None, "torch is not installed (tools/setup.sh --bench)")
class SameStepTest(unittest.TestCase):
    def check(self, spec, seed, perturb):
        from gpt_grad_compare import compare
        from gpt_vs_pytorch import Gpt, parse_spec, tandem_init
        torch.set_num_threads(1)
        cfg = parse_spec(spec)
        model = Gpt(cfg)
        tandem_init(model, cfg, seed)
        gen = torch.Generator().manual_seed(seed)
        if perturb:
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.05 * torch.randn(p.shape, generator=gen))
        windows = torch.randint(0, 256, (3, cfg["context"] + 1), generator=gen)
        t_loss, p_loss, rows = compare(DUMP, spec, seed, model, windows)
        self.assertAlmostEqual(t_loss, p_loss, delta=LOSS_TOL)
        self.assertEqual(len(rows), len(list(model.parameters())))
        for name, rel in rows:
            self.assertLess(rel, GRAD_TOL, name)

    def test_tandem_init_head_size_8(self):
        self.check("gpt:layers=2,d=32,heads=4,ctx=16", 1, perturb=False)

    def test_tandem_init_head_size_16(self):
        self.check("gpt:layers=2,d=32,heads=2,ctx=16", 2, perturb=False)

    def test_perturbed_weights(self):
        self.check("gpt:layers=1,d=32,heads=2,ctx=16", 3, perturb=True)

    def test_a_different_batch_is_caught(self):
        # The comparison can fail: tandem on other windows than PyTorch.
        from gpt_grad_compare import tandem_step
        from gpt_vs_pytorch import Gpt, parse_spec, tandem_init
        spec = "gpt:layers=1,d=32,heads=2,ctx=16"
        cfg = parse_spec(spec)
        model = Gpt(cfg)
        tandem_init(model, cfg, 4)
        gen = torch.Generator().manual_seed(4)
        a = torch.randint(0, 256, (2, 17), generator=gen)
        b = torch.randint(0, 256, (2, 17), generator=gen)
        la, _ = tandem_step(DUMP, spec, 4, model, a)
        lb, _ = tandem_step(DUMP, spec, 4, model, b)
        self.assertGreater(abs(la - lb), LOSS_TOL)


if __name__ == "__main__":
    unittest.main()
