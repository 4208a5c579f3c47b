import json

import pytest

from bulkwrite import OpError, op_from_json, pb, read_ops


def kinds(op):
    return {f.name: (f.value.WhichOneof("kind"), getattr(f.value, f.value.WhichOneof("kind")), f.increment)
            for f in op.fields}


def test_each_json_value_maps_as_the_api_says():
    op = op_from_json({"op": "UPDATE", "object_type": "pin", "id": "211174952009729", "fields": {
        "n": None, "b": False, "i": -7, "d": 4.5, "e": 1e3, "s": "Lake \u00e0 l'aube\u0000",
        "img": {"base64": "iVBORw0KGgo="}, "url": {"base64": "-_8"}, "likes": {"increment": 1},
        "score": {"increment": 0.5}}})
    assert op.op == pb.UPDATE and op.object_type == "pin" and op.id == 211174952009729
    assert kinds(op) == {
        "n": ("null_value", True, False), "b": ("bool_value", False, False), "i": ("int_value", -7, False),
        "d": ("double_value", 4.5, False), "e": ("double_value", 1000.0, False),
        "s": ("string_value", "Lake \u00e0 l'aube\u0000".encode(), False),
        "img": ("bytes_value", b"\x89PNG\r\n\x1a\n", False), "url": ("bytes_value", b"\xfb\xff", False),
        "likes": ("int_value", 1, True), "score": ("double_value", 0.5, True)}
    assert [f.name for f in op.fields] == ["n", "b", "i", "d", "e", "s", "img", "url", "likes", "score"]


def test_create_with_shard_key_and_max_id():
    op = op_from_json({"op": "create", "object_type": "pin", "id": 2**64 - 1, "shard_key": "42", "fields": {}})
    assert (op.op, op.id, op.shard_key) == (pb.CREATE, 2**64 - 1, "42")


@pytest.mark.parametrize("d, why", [
    ({"op": "create", "extra": 1}, 'unknown member "extra"'),
    ({"op": "merge"}, "is not create"),
    ({"op": 1}, "is not create"),
    ({"op": "delete", "id": -1}, "id: not an unsigned"),
    ({"op": "delete", "id": 2**64}, "id: not an unsigned"),
    ({"op": "delete", "id": True}, "id: not an unsigned"),
    ({"op": "delete", "id": "12a"}, "id: not an unsigned"),
    ({"op": "update", "id": 1, "fields": {"x": [1]}}, "fields.x"),
    ({"op": "update", "id": 1, "fields": {"x": 2**63}}, "beyond 64 bits"),
    ({"op": "update", "id": 1, "fields": {"x": {"increment": "1"}}}, "an increment is a number"),
    ({"op": "update", "id": 1, "fields": {"x": {"base64": "!!"}}}, "bad base64"),
    ({"op": "update", "id": 1, "fields": {"x": {"other": 1}}}, "an object value"),
    ({"op": "update", "id": 1, "fields": []}, "fields is an object"),
])
def test_what_the_proxy_would_call_malformed_is_refused(d, why):
    with pytest.raises(OpError, match=why):
        op_from_json(d)


def test_read_ops_names_the_line_and_can_skip_it(tmp_path):
    p = tmp_path / "ops.jsonl"
    good = {"op": "delete", "object_type": "pin", "id": 5}
    p.write_text(json.dumps(good) + "\n\n{not json\n" + '{"op": "delete", "id": 1, "id": 2}\n'
                 + json.dumps(dict(good, id=6)) + "\n")
    with pytest.raises(OpError) as e:
        list(read_ops(str(p)))
    assert e.value.line == 3
    errors = []
    ops = list(read_ops(str(p), errors.append))
    assert [o.id for o in ops] == [5, 6]
    assert [e.line for e in errors] == [3, 4] and "duplicate" in str(errors[1])
