"""The ctypes structs of flashcl._capi against the layout the ABI reference
(abi/libflashcl.abi, libabigail's XML of the last release) records: each
field it knows at the same offset, and the same size where it knows them
all (fields are only ever appended)."""
import ctypes
import pathlib
import xml.etree.ElementTree as ET

from flashcl import _capi

ABI = pathlib.Path(__file__).resolve().parents[2] / "abi" / "libflashcl.abi"
STRUCTS = {"fcl_tensor": _capi.Tensor, "fcl_attention_desc": _capi.AttentionDesc,
           "fcl_kvcache_desc": _capi.KvcacheDesc, "fcl_rwkv6_desc": _capi.Rwkv6Desc,
           "fcl_config_info": _capi.ConfigInfo, "fcl_context_stats": _capi.ContextStats}


def test_structs_match_the_abi_reference():
    seen = set()
    for decl in ET.parse(ABI).getroot().iter("class-decl"):
        name = decl.get("name")
        if name not in STRUCTS or decl.get("is-declaration-only") == "yes":
            continue
        seen.add(name)
        cls = STRUCTS[name]
        fields = [(m.find("var-decl").get("name"), int(m.get("layout-offset-in-bits")))
                  for m in decl.iter("data-member")]
        ours = [(f[0], getattr(cls, f[0]).offset * 8) for f in cls._fields_]
        assert ours[:len(fields)] == fields, name
        if len(fields) == len(ours):
            assert ctypes.sizeof(cls) * 8 == int(decl.get("size-in-bits")), name
    assert seen == set(STRUCTS)
