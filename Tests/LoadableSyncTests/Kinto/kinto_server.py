"""A real Kinto for the tests of KintoRemote, on 127.0.0.1 only, that stops by itself.

Run with the Python of a virtual environment that has Kinto (`pip install kinto==26.5.0`):

    .build/kinto-venv/bin/python Tests/LoadableSyncTests/Kinto/kinto_server.py [--paginate-by 5]

It writes an ini to a temporary directory (memory backends, the accounts and history plugins,
anyone may create an account, any account a bucket, `paginate_by` small enough to page), builds
Kinto's app from it as `kinto start` does (pyramid's paster), and serves it with waitress, as
`kinto start` does, on a port the system picks. Once the socket listens, it prints
`listening on <port>` on stdout and flushes; everything else goes to stderr.

It exits when its stdin closes (the test process that started it ended, however it ended), and
after `--lifetime` seconds in any case: a test run that crashed never leaves it behind.
"""

import argparse
import os
import sys
import tempfile
import threading

INI = """\
[app:main]
use = egg:kinto
kinto.storage_backend = kinto.core.storage.memory
kinto.storage_url =
kinto.cache_backend = kinto.core.cache.memory
kinto.cache_url =
kinto.permission_backend = kinto.core.permission.memory
kinto.permission_url =
kinto.includes = kinto.plugins.accounts
                 kinto.plugins.history
multiauth.policies = account
multiauth.policy.account.use = kinto.plugins.accounts.AccountsPolicy
kinto.account_create_principals = system.Everyone
kinto.bucket_create_principals = system.Authenticated
kinto.userid_hmac_secret = loadable-tests-only
kinto.paginate_by = {paginate_by}
"""


def exit_when_stdin_closes() -> None:
    """Reads stdin until it closes, then ends the process at once (waitress never returns)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)


def exit_after(seconds: float) -> None:
    """Ends the process after `seconds`, whatever it is doing."""
    timer = threading.Timer(seconds, lambda: os._exit(0))
    timer.daemon = True
    timer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paginate-by", type=int, default=5, help="records per page (default 5)")
    parser.add_argument("--lifetime", type=float, default=20 * 60, help="seconds before it exits (default 1200)")
    arguments = parser.parse_args()

    # The watchdogs first: a failure below must not leave a process that never ends.
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    exit_after(arguments.lifetime)

    # Imported here so that `--help` works without Kinto.
    from pyramid.paster import get_app
    from waitress.server import create_server

    # The ini is read once, to build the app: it leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="loadable-kinto-") as directory:
        ini = os.path.join(directory, "kinto.ini")
        with open(ini, "w", encoding="utf-8") as file:
            file.write(INI.format(paginate_by=arguments.paginate_by))
        app = get_app(ini, "main")

    # Port 0: the system picks a free port when the server binds, so two test runs never clash.
    server = create_server(app, host="127.0.0.1", port=0, threads=8)
    port = server.effective_port
    print(f"listening on {port}", flush=True)
    # Nothing else goes to stdout: the reader of that line may stop reading the pipe.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    server.run()


if __name__ == "__main__":
    main()
