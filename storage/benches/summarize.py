#!/usr/bin/env python3
"""Collects criterion's estimates from target/criterion into a JSON file and a Markdown table.

Usage: python3 storage/benches/summarize.py target/criterion docs/benchmarks-storage.json
"""
import json
import os
import sys


def main():
    root, out_json = sys.argv[1], sys.argv[2]
    rows = []
    for dirpath, _, files in os.walk(root):
        if {"estimates.json", "benchmark.json"} <= set(files) and dirpath.endswith(os.sep + "new"):
            with open(os.path.join(dirpath, "estimates.json")) as f:
                est = json.load(f)
            with open(os.path.join(dirpath, "benchmark.json")) as f:
                meta = json.load(f)
            rows.append({
                "group": meta.get("group_id"),
                "engine": meta.get("function_id") or meta.get("group_id"),
                "param": meta.get("value_str"),
                "mean_us": est["mean"]["point_estimate"] / 1000.0,
                "median_us": est["median"]["point_estimate"] / 1000.0,
            })
    rows.sort(key=lambda r: (r["group"] or "", str(r["param"] or ""), r["engine"] or ""))
    with open(out_json, "w") as f:
        json.dump(rows, f, indent=1)
    print("| group | param | engine | mean (us) | median (us) |")
    print("|---|---|---|---:|---:|")
    for r in rows:
        print(f"| {r['group']} | {r['param'] or ''} | {r['engine']} | {r['mean_us']:.1f} | {r['median_us']:.1f} |")


if __name__ == "__main__":
    main()
