"""The stack the live tests run against, as test/tiers/client-python.sh starts it: the
proxy at BW_PROXY_URL, shards 0-3 on MariaDB at BW_DB_A and 4-7 at BW_DB_B (root, no
password), consumers running."""

import os
import subprocess

URL = os.environ.get("BW_PROXY_URL", "")
# the tier's clients (test/tiers/client-python.sh): the tests send as a submit client;
# shard control needs an admin; a read-only one may follow jobs, not send them
TOKEN = os.environ.get("BW_TOKEN")
ADMIN_TOKEN = os.environ.get("BW_ADMIN_TOKEN")
READ_TOKEN = os.environ.get("BW_READ_TOKEN")
# proxy.backlog_max_messages as the tier sets it: a paused shard refuses (429) past it
BACKLOG_MAX_MESSAGES = int(os.environ.get("BW_BACKLOG_MAX_MESSAGES", "20"))


def sql(shard: int, query: str) -> list[list[str]]:
    """Rows of a query on a shard's MariaDB server, as text."""
    port = os.environ["BW_DB_A"] if shard < 4 else os.environ["BW_DB_B"]
    out = subprocess.run(["mariadb", "-h127.0.0.1", f"-P{port}", "-uroot", "-N", "-B", "-e", query],
                         check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines()]
