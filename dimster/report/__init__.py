"""HTML reports of summarized runs: one run (`html.write_report`) or several side by side
(`compare.write_comparison`). Each report is one self-contained file that works offline."""
