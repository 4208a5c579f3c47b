import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # stack

from stack import TOKEN, URL  # noqa: E402

from bulkwrite import Client  # noqa: E402


@pytest.fixture
def client():
    with Client(URL, token=TOKEN) as c:
        yield c
