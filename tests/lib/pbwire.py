"""Protocol buffer wire format by hand, for the tests that write encodings
protobuf-c or the onnx package would not (unknown fields, fields out of
order, repeated scalars): t_onnx_io, t_onnx_save_flat."""


def varint(v):
    """v (>= 0) as a base-128 varint"""
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wt, payload):
    """field num of wire type wt: payload is the encoded value (a varint,
    or for wire type 2 the bytes, whose length is put before them)"""
    if wt == 2:
        return varint(num << 3 | 2) + varint(len(payload)) + payload
    return varint(num << 3 | wt) + payload
