"""Reading a svmlight / libFM text file as blocks of whole lines (:mod:`._svmlight`).

Compression chosen by the extension (as scikit-learn's loader does), blocks that never cut a
line, the parser of one block, and the test of a data line.
"""

import bz2
import gzip
import io
import os

from sklearn.datasets import load_svmlight_file


def _compression(path):
    ext = os.path.splitext(os.fspath(path))[1].lower()
    return {".gz": "gzip", ".bz2": "bz2"}.get(ext)


def _open_binary(path):
    # Same rule as scikit-learn's loader: compression is chosen by the file extension.
    kind = _compression(path)
    if kind == "gzip":
        return gzip.open(path, "rb")
    if kind == "bz2":
        return bz2.BZ2File(path, "rb")
    return open(path, "rb")


def _line_blocks(path, block_size):
    """Yield ``(first_line_number, bytes)`` blocks of whole lines of the (decompressed) file.

    A block is ``block_size`` bytes give or take one line, and ends at a line end, so that the
    parser never sees a truncated line. Line numbers start at 1 and count ``\\n`` as the
    parser does (binary line iteration).
    """
    line_no = 1
    carry = b""
    with _open_binary(path) as f:
        while True:
            buf = f.read(block_size)
            if not buf:
                break
            buf = carry + buf
            cut = buf.rfind(b"\n") + 1
            if cut == 0:  # a line longer than block_size: keep reading until it ends
                carry = buf
                continue
            block, carry = buf[:cut], buf[cut:]
            yield line_no, block
            line_no += block.count(b"\n")
    if carry:
        yield line_no, carry


def _parse(data, zero_based, n_features, dtype):
    return load_svmlight_file(
        io.BytesIO(data), n_features=n_features, dtype=dtype, zero_based=zero_based
    )


def _is_data_line(line):
    # scikit-learn's test: what is left of the line before '#' has a token.
    return bool(line.split(b"#", 1)[0].split())
