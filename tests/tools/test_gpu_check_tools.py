#!/usr/bin/env python3
"""scripts/gpu_check_tools.py: the comparison of a CUDA run with its reference (compare) and the
gtest report reader (gtest), on small hand-made results files and reports. Exits 77 (skipped)
without numpy and h5py."""
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import h5py
    import numpy as np
except ImportError:
    print("SKIP: this python lacks numpy or h5py")
    sys.exit(77)

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "gpu_check_tools.py")
TOL, NEAR_TIE = 0.5, 0.5


def write_results(path, rows, top=None):
    """rows: [(output tokens, logprobs)], prompts [5, 6, 7]; top: per row [(tokens, logprobs)] per
    position (the reference's top logprobs), or None."""
    vi = h5py.vlen_dtype(np.dtype("int32"))
    vf = h5py.vlen_dtype(np.dtype("float32"))
    vs = h5py.string_dtype()
    n = len(rows)
    with h5py.File(path, "w") as f:
        f.attrs["complete"] = 1
        f.create_dataset("id", (n,), dtype=vs, data=["r%d" % i for i in range(n)])
        f.create_dataset("done", data=np.ones(n, dtype=np.uint8))
        f.create_dataset("finish_reason", (n,), dtype=vs, data=["length"] * n)
        f.create_dataset("error", (n,), dtype=vs, data=[""] * n)
        for name, dt, vals in (("prompt_tokens", vi, [[5, 6, 7]] * n), ("output_tokens", vi, [r[0] for r in rows]),
                               ("output_logprobs", vf, [r[1] for r in rows])):
            d = f.create_dataset(name, (n,), dtype=dt)
            for i, v in enumerate(vals):
                d[i] = np.asarray(v, dtype=dt.metadata["vlen"])
        if top is not None:
            tt = f.create_dataset("top_logprob_tokens", (n,), dtype=vi)
            tl = f.create_dataset("top_logprobs", (n,), dtype=vf)
            for i, per_pos in enumerate(top):
                tt[i] = np.asarray([t for toks, _ in per_pos for t in toks], dtype=np.int32)
                tl[i] = np.asarray([l for _, lps in per_pos for l in lps], dtype=np.float32)


def top2(tokens, logprobs, second):
    """Top-2 per position: the chosen token and `second` (token, logprob) at each."""
    return [([t, s[0]], [l, s[1]]) for t, l, s in zip(tokens, logprobs, second)]


class Compare(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.ref_tokens = [10, 11, 12, 13]
        self.ref_lp = [-0.5, -0.7, -0.9, -1.1]
        # The reference's runner-up at each position: token 20 + i, 0.1 below at position 2, far elsewhere.
        self.second = [(20, -2.5), (21, -2.7), (22, -1.0), (23, -3.1)]

    def tearDown(self):
        self.dir.cleanup()

    def run_compare(self, a_rows, ref_rows=None, ref_top="default"):
        ref_rows = ref_rows or [(self.ref_tokens, self.ref_lp)] * len(a_rows)
        if ref_top == "default":
            ref_top = [top2(t, l, self.second) for t, l in ref_rows]
        a, b = os.path.join(self.dir.name, "a.h5"), os.path.join(self.dir.name, "b.h5")
        write_results(a, a_rows)
        write_results(b, ref_rows, ref_top)
        p = subprocess.run([sys.executable, TOOLS, "compare", a, b, "--tol", str(TOL), "--near-tie", str(NEAR_TIE)],
                           capture_output=True, text=True, check=True)
        f = p.stdout.split()
        return {"verdict": f[0], "rows_same": int(f[1]), "rows": int(f[2]), "near_ties": int(f[3]),
                "tokens_common": int(f[4]), "tokens": int(f[5]), "max_d": float(f[6]), "first": f[7],
                "why": p.stderr}

    def test_identical_runs_pass_with_every_row_the_same(self):
        r = self.run_compare([(self.ref_tokens, self.ref_lp)] * 2)
        self.assertEqual((r["verdict"], r["rows_same"], r["rows"], r["near_ties"]), ("pass", 2, 2, 0))
        self.assertEqual((r["tokens_common"], r["tokens"], r["max_d"], r["first"]), (8, 8, 0.0, "-"))

    def test_logprobs_within_the_tolerance_pass_and_report_the_largest_difference(self):
        r = self.run_compare([(self.ref_tokens, [-0.5, -0.3, -0.9, -1.1])])
        self.assertEqual(r["verdict"], "pass")
        self.assertAlmostEqual(r["max_d"], 0.4, places=5)

    def test_a_logprob_beyond_the_tolerance_fails(self):
        r = self.run_compare([(self.ref_tokens, [-0.5, -0.7, -0.3, -1.1])])
        self.assertEqual(r["verdict"], "FAIL")
        self.assertAlmostEqual(r["max_d"], 0.6, places=5)

    def test_a_divergence_at_a_near_tie_passes_and_later_positions_are_not_compared(self):
        # Position 2: the run under test picks the reference's runner-up (0.1 below); it then
        # continues another text, whose tokens and logprobs are not comparable.
        r = self.run_compare([([10, 11, 22, 99], [-0.5, -0.7, -0.95, -9.0])])
        self.assertEqual((r["verdict"], r["rows_same"], r["near_ties"]), ("pass", 0, 1))
        self.assertEqual((r["tokens_common"], r["first"]), (2, "row0@2"))
        self.assertAlmostEqual(r["max_d"], 0.05, places=5)  # its token's logprob against the reference's

    def test_a_divergence_that_is_not_a_near_tie_fails(self):
        # Position 1: the runner-up is 2.0 below the reference's choice.
        r = self.run_compare([([10, 21, 12, 13], [-0.5, -0.7, -0.9, -1.1])])
        self.assertEqual((r["verdict"], r["near_ties"]), ("FAIL", 0))
        self.assertIn("not a near tie", r["why"])

    def test_a_token_outside_the_references_top_logprobs_fails(self):
        r = self.run_compare([([10, 11, 77, 13], [-0.5, -0.7, -0.9, -1.1])])
        self.assertEqual(r["verdict"], "FAIL")
        self.assertIn("not among the reference's top 2", r["why"])

    def test_a_divergence_cannot_be_judged_without_the_references_top_logprobs(self):
        r = self.run_compare([([10, 11, 22, 13], [-0.5, -0.7, -0.95, -1.1])], ref_top=None)
        self.assertEqual(r["verdict"], "FAIL")
        self.assertIn("no top logprobs", r["why"])

    def test_a_near_tie_whose_logprob_disagrees_beyond_the_tolerance_fails(self):
        r = self.run_compare([([10, 11, 22, 13], [-0.5, -0.7, -1.7, -1.1])])
        self.assertEqual((r["verdict"], r["near_ties"]), ("FAIL", 1))

    def test_runs_of_different_lengths_fail(self):
        r = self.run_compare([([10, 11, 12], [-0.5, -0.7, -0.9])])
        self.assertEqual(r["verdict"], "FAIL")
        self.assertIn("lengths differ", r["why"])

    def test_different_row_counts_fail(self):
        r = self.run_compare([(self.ref_tokens, self.ref_lp)], ref_rows=[(self.ref_tokens, self.ref_lp)] * 2)
        self.assertEqual((r["verdict"], r["rows"]), ("FAIL", 2))


REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" name="AllTests">
  <testsuite name="K" tests="3">
    <testcase name="Add" status="run" result="completed" time="0.5" classname="K">
      <properties><property name="max_rel_err" value="%s"/></properties>
    </testcase>
    <testcase name="Old" status="run" result="completed" time="0.25" classname="K" max_rel_err="0.002"/>
    <testcase name="Rope" status="run" result="%s" time="0.1" classname="K">%s</testcase>
  </testsuite>
</testsuites>
"""


class Gtest(unittest.TestCase):
    def report(self, name, err, rope_result="completed", rope_body=""):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(REPORT % (err, rope_result, rope_body))
        return path

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def lines(self, *paths):
        out = subprocess.run([sys.executable, TOOLS, "gtest", *paths], capture_output=True, text=True, check=True).stdout
        return {l.split("|")[0]: l.split("|")[1:] for l in out.splitlines()}

    def test_reads_max_rel_err_from_properties_and_from_the_older_attribute(self):
        got = self.lines(self.report("a.xml", "0.0031"))
        self.assertEqual(got["K.Add"], ["pass", "0.0031", "0.5"])
        self.assertEqual(got["K.Old"], ["pass", "0.002", "0.25"])
        self.assertEqual(got["K.Rope"], ["pass", "-", "0.1"])

    def test_over_several_ranks_a_failure_on_one_fails_and_the_largest_error_counts(self):
        got = self.lines(self.report("r0.xml", "0.001"),
                         self.report("r1.xml", "0.004", rope_body='<failure message="x"/>'))
        self.assertEqual(got["K.Add"][:2], ["pass", "0.004"])
        self.assertEqual(got["K.Rope"][0], "FAIL")

    def test_skipped_only_when_skipped_on_every_rank(self):
        skipped = '<skipped message="no CUDA device"/>'
        self.assertEqual(self.lines(self.report("s0.xml", "0", "skipped", skipped),
                                    self.report("s1.xml", "0", "skipped", skipped))["K.Rope"][0], "skipped")


if __name__ == "__main__":
    unittest.main()
