"""The smoke test of an installed package (a wheel on its platform, the release workflow; the
packaging tests): it is imported from the environment it was installed in, opens a store, appends
and reads back exactly, and refuses bad input with its code.

    python smoke.py <store path>
"""

import sys

import threadline
from threadline import Store, ThreadlineError

assert threadline.__file__.startswith(sys.prefix), (threadline.__file__, sys.prefix)
with Store.open(sys.argv[1]) as store:
    s = store.create_session(project="wheel")
    m = {"role": "user", "content": [{"type": "text", "text": "from the wheel"}], "big": 10**30}
    s.append(m)
    assert s.messages == [m]
    with Store.open(sys.argv[1]) as again:  # read back through another handle
        assert again.open_session(s.id).messages == [m]
    try:
        s.append({"role": "user", "content": b"x"})
    except ThreadlineError as e:
        assert e.code == "INVALID_INPUT", e.code
        print(e.code)
    else:
        raise SystemExit("bytes content was stored, not refused")
