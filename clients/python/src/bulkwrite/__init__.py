"""bulkwrite's Python client (clients/python/README.md)."""

from .client import BulkwriteError, Client, Rejection, SubmitResult, describe_waits, split_parts
from .ops import OpError, op_from_json, read_ops
from .v1 import bulkwrite_pb2 as pb

__all__ = ["BulkwriteError", "Client", "OpError", "Rejection", "SubmitResult", "describe_waits",
           "op_from_json", "pb", "read_ops", "split_parts"]
