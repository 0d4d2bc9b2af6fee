"""What the kubelet does to a container's args and env values: ``$(VAR)`` expansion."""

from __future__ import annotations


def kubelet_expand(text: str, env: dict[str, str] | None = None) -> str:
    """What the kubelet makes of an arg or env value: Kubernetes'
    third_party/forked/golang/expansion/expand.go (``$$`` -> ``$``; ``$(NAME)`` -> the
    variable, raising here since an export must never hold one; any other ``$`` as is)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    raise AssertionError(f"the kubelet would expand {text[i : end + 1]!r}")
        out.append(text[i])
        i += 1
    return "".join(out)
