"""`SecureReport.decode`'s one-pass parse against its field-by-field parse: the same report
from any valid encoding, the same error (naming the field) from any cut or padded one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.secure.upload import SecureFormatError, SecureReport


@st.composite
def reports(draw: st.DrawFn) -> SecureReport:
    return SecureReport(
        draw(st.text(min_size=1, max_size=20).filter(lambda q: len(q.encode()) < 256)),
        draw(st.integers(min_value=0, max_value=2**32 - 1)),
        draw(st.binary(min_size=16, max_size=16)),
        draw(st.binary(max_size=70)),
        draw(st.binary(max_size=90)),
        draw(st.binary(max_size=90)),
    )


@given(report=reports())
def test_a_valid_encoding_decodes_to_its_report(report: SecureReport) -> None:
    assert SecureReport.decode(report.encode()) == report


@given(report=reports(), data=st.data())
def test_a_cut_or_padded_encoding_is_refused_as_the_field_parse_refuses_it(
    report: SecureReport, data: st.DataObject
) -> None:
    encoded = report.encode()
    if data.draw(st.booleans()):
        broken = encoded[: data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))]
    else:
        broken = encoded + data.draw(st.binary(min_size=1, max_size=8))
    with pytest.raises(SecureFormatError) as by_field:
        SecureReport._decode_by_field(broken)
    with pytest.raises(SecureFormatError) as one_pass:
        SecureReport.decode(broken)
    assert str(one_pass.value) == str(by_field.value)
