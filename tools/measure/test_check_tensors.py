#!/usr/bin/env python3
"""test_check_tensors.py - check_tensors.compare() finds every kind of
difference between the planner's tensor list and transformers' (no
torch, no gpumem)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import check_tensors  # noqa: E402

WANT = {"parameters": 110, "tensors": [
    {"name": "model.embed_tokens.weight", "shape": [10, 4], "count": 1},
    {"name": "model.layers.*.mlp.up_proj.weight", "shape": [8, 4],
     "count": 2},
    {"name": "model.norm.weight", "shape": [4], "count": 1}]}


def planner(**change):
    got = {"parameters": WANT["parameters"],
           "tensors": [dict(t) for t in WANT["tensors"]]}
    got.update(change)
    return got


class Compare(unittest.TestCase):
    def test_equal(self):
        self.assertEqual(check_tensors.compare(planner(), WANT), [])

    def test_order_does_not_matter(self):
        got = planner(tensors=list(reversed(WANT["tensors"])))
        self.assertEqual(check_tensors.compare(got, WANT), [])

    def test_count(self):
        got = planner(parameters=111)
        self.assertIn("parameters", check_tensors.compare(got, WANT)[0])

    def test_shape(self):
        got = planner()
        got["tensors"][1]["shape"] = [4, 8]
        d = check_tensors.compare(got, WANT)
        self.assertEqual(len(d), 2)
        self.assertTrue(d[0].startswith("missing"))
        self.assertTrue(d[1].startswith("extra"))

    def test_layers(self):
        got = planner()
        got["tensors"][1]["count"] = 3
        self.assertTrue(check_tensors.compare(got, WANT)[0]
                        .startswith("count"))

    def test_missing_tensor(self):
        got = planner(tensors=WANT["tensors"][:2])
        self.assertTrue(check_tensors.compare(got, WANT)[0]
                        .startswith("missing model.norm.weight"))


if __name__ == "__main__":
    unittest.main()
