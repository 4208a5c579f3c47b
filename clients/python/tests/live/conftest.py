import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # stack

from stack import URL  # noqa: E402

from bulkwrite import Client  # noqa: E402


@pytest.fixture
def client():
    with Client(URL) as c:
        yield c
