"""Not imported: tests/test_registries.py checks that its walker finds these three dispatches."""
plan = None
a = plan == "kai"
b = plan in ("kueue", "x")
c = {"volcano": 1}
