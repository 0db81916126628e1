"""The benchmark harness: ``python -m bench`` from a source checkout (not part of the wheel).

- cases.py: the sizes, one setup factory per op, OPS (op -> factory, cases, providers), plan();
- providers.py: who runs a row (ours in each call form, our floors, the peers), and the only
  reason to skip one;
- runner.py: timing, the same-size copy reference, repeated runs;
- targets.py: the performance targets as data, and their evaluation;
- report.py: progress, table, JSON, plot, the machine (py-cpuinfo, threadpoolctl);
- command.py: the command line.

Its requirements beyond the library's: bench/requirements.txt.
"""
