#!/usr/bin/env python3
"""plan_vs_measured.py's calibration arithmetic and job_cpu.py's CPU per
step on made-up numbers whose answers are known: the two rings' CPU
difference over their rounds' difference is a real round, the rest of the
flat ring's worker CPU is step_cpu_s, ps's CPU beyond that per call is the
call; a job's round is the bare one moved until the plan's (linear) chain
is the measured step; the plan's CPU parts sum to host_cpu_s."""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import job_cpu  # noqa: E402
import plan_vs_measured as pvm  # noqa: E402


def pred(work, rounds, calls=0, server=0.0, round_cpu=40e-6):
    return {"worker_work_s": work, "worker_rounds": rounds, "worker_calls": calls,
            "server_cpu_s": server, "round_cpu_s": round_cpu}


class JobTermsTest(unittest.TestCase):
    def test_rings_give_the_round_and_ps_the_call(self):
        n, step, rnd, call = 16, 1.5e-3, 80e-6, 1.0e-3
        p = {"allreduce": pred(0.2e-3, 30), "hier": pred(0.3e-3, 14),
             "ps": pred(0.1e-3, 2, calls=9, server=0.2e-3)}
        flat = {"worker": n * (step + 0.2e-3 + 30 * rnd), "coordinator": 0.3e-3}
        hier = {"worker": n * (step + 0.3e-3 + 14 * rnd)}
        ps = {"worker": n * (step + 0.1e-3 + 2 * rnd + 9 * call / 2),
              "shard": n * 9 * call / 2 + 0.2e-3, "coordinator": 1e-3, "dataserver": 0.0}
        s, r, c = pvm.job_terms(flat, hier, ps, p, n)
        self.assertAlmostEqual(r, rnd, places=12)
        self.assertAlmostEqual(s, step, places=12)
        self.assertAlmostEqual(c, call, places=12)

    def test_without_a_hier_job_the_bare_round_counts(self):
        p = {"allreduce": pred(0.0, 6, round_cpu=50e-6), "ps": pred(0.0, 2, calls=5)}
        flat = {"worker": 4 * (1e-3 + 6 * 50e-6)}
        ps = {"worker": 4 * (1e-3 + 2 * 50e-6 + 5 * 0.5e-3)}
        s, r, c = pvm.job_terms(flat, None, ps, p, 4)
        self.assertEqual(r, 50e-6)
        self.assertAlmostEqual(s, 1e-3, places=12)
        self.assertAlmostEqual(c, 0.5e-3, places=12)


class JobRingRoundTest(unittest.TestCase):
    def test_moves_the_round_until_the_chain_is_the_step(self):
        # A chain of 60 rounds plus 10 ms: at the bare 0.4 ms it is 34 ms.
        def planned(path):
            with open(path) as f:
                text = f.read()
            self.assertIn("step_cpu_s = 0\n", text)  # the floor left out
            r = float(text.split("ring_round_16_s = ")[1].split()[0])
            return {"allreduce": {"step_s": 10e-3 + 60 * r}}
        text = "ring_round_16_s = 0.0004\nstep_cpu_s = 0.0016\n"
        with tempfile.TemporaryDirectory() as d:
            self.assertAlmostEqual(pvm.job_ring_round(text, 16, 52e-3, planned, d), 0.7e-3)
            # A step the chain already covers keeps the bare round.
            self.assertIsNone(pvm.job_ring_round(text, 16, 30e-3, planned, d))


class CpuPerStepTest(unittest.TestCase):
    def test_roles_sum_their_processes_over_the_window(self):
        first = {"worker-0": 1.0, "worker-1": 2.0, "shard-0": 0.5, "coordinator": 0.1}
        last = {"worker-0": 1.6, "worker-1": 2.4, "shard-0": 0.8, "coordinator": 0.1,
                "worker-2": 9.0}  # not alive at the first snapshot: left out
        roles = job_cpu.per_step_by_role(first, last, 10)
        self.assertAlmostEqual(roles["worker"], 0.1)
        self.assertAlmostEqual(roles["shard"], 0.03)
        self.assertAlmostEqual(roles["coordinator"], 0.0)

    def test_the_plans_parts_sum_to_its_total(self):
        p = {"host_cpu_s": 16 * (1e-3 + 0.1e-3 + 30 * 80e-6 + 9 * 1e-3) + 0.5e-3,
             "step_cpu_s": 1e-3, "worker_work_s": 0.1e-3, "worker_rounds": 30,
             "round_cpu_s": 80e-6, "worker_calls": 9, "call_cpu_s": 1e-3, "server_cpu_s": 0.5e-3}
        parts = pvm.predicted_cpu_ms(p, 16)
        self.assertAlmostEqual(parts["workers"] + parts["calls"] + parts["server_optimizer"],
                               parts["total"])
        self.assertAlmostEqual(parts["calls"], 16 * 9 * 1.0)
        self.assertIsNone(pvm.predicted_cpu_ms({"host_cpu_s": 0}, 16))


if __name__ == "__main__":
    unittest.main()
