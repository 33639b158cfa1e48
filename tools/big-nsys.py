#!/usr/bin/env python3
"""A large Nsight Systems export, for the read speed of the SQLite readers (`node tools/sqlite-readers.mjs`).

    python3 tools/big-nsys.py SOURCE.sqlite OUT.sqlite SIZE_MB

Copies SOURCE (a real `nsys export --type sqlite` file: its schema, enumerations and strings) to OUT, then appends
the rows of its CUPTI activity tables again and again, timestamps shifted past the previous copy and correlation ids
renumbered, until OUT holds about SIZE_MB (1e6 bytes). Nothing is invented: every row is one of SOURCE's.
"""
import os
import shutil
import sqlite3
import sys

ACTIVITY = ('CUPTI_ACTIVITY_KIND_KERNEL', 'CUPTI_ACTIVITY_KIND_MEMCPY', 'CUPTI_ACTIVITY_KIND_MEMSET',
            'CUPTI_ACTIVITY_KIND_RUNTIME', 'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION')


def main(source: str, out: str, size_mb: float) -> None:
    shutil.copyfile(source, out)
    os.chmod(out, 0o644)
    db = sqlite3.connect(out)
    tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'") if t in ACTIVITY]
    rows = {t: db.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    cols = {t: [c[1] for c in db.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    lo = min(db.execute(f'SELECT min(start) FROM "{t}"').fetchone()[0] or 0 for t in tables)
    hi = max(db.execute(f'SELECT max("end") FROM "{t}"').fetchone()[0] or 0 for t in tables)
    corr = max(db.execute(f'SELECT max(correlationId) FROM "{t}"').fetchone()[0] or 0
               for t in tables if 'correlationId' in cols[t]) + 1
    target = size_mb * 1e6
    copy = 0
    while os.path.getsize(out) < target:
        copy += 1
        shift = copy * (hi - lo + 1000)
        for t in tables:
            c = cols[t]
            si, ei = c.index('start'), c.index('end')
            ci = c.index('correlationId') if 'correlationId' in c else -1
            batch = []
            for r in rows[t]:
                r = list(r)
                r[si] += shift
                r[ei] += shift
                if ci >= 0 and r[ci] is not None:
                    r[ci] += copy * corr
                batch.append(r)
            db.executemany(f'INSERT INTO "{t}" VALUES ({", ".join("?" * len(c))})', batch)
        if copy % 20 == 0:
            db.commit()
    db.commit()
    counts = {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    db.close()
    print(f'{out}: {os.path.getsize(out) / 1e6:.0f} MB, {copy + 1} copies of {source}: {counts}')


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
