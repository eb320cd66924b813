"""TAP output for the analysis checks (tests/analysis-*-checks.py): ok() for
each check, done() at the end, which also fails a run that fell short of
its plan."""
import sys

count = failed = 0


def ok(cond, desc, detail=None):
    global count, failed
    count += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", count, desc))
    if not cond:
        failed += 1
        if detail is not None:
            print("#   " + str(detail).replace("\n", "\n#   "))
    return cond


def done(plan):
    if count != plan:
        print("# planned %d checks but ran %d" % (plan, count))
    sys.exit(1 if failed or count != plan else 0)
