"""What the twin expects of a command line and a load, labelled with its stated error.

:func:`predict` runs the load on the twin of a profile (the simulator's scheduler with the
profile's step times and memory side, on a virtual clock) and returns the one result type,
:class:`~tui.domain.prediction.Prediction`, labelled with the profile and the interval it
states (its validation error; a profile never validated says its error is the fit's). A
profile of another server (model, device or vLLM version) is marked in the label:
:func:`server_identity` says what is known of the server predicted for.
"""

from __future__ import annotations

from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import Prediction
from tui.domain.profile import Profile, ProfileIdentity, identity_mismatch
from tui.domain.results import RunRecord
from tui.domain.workload import LoadSpec
from tui.sim.twin import twin_config
from tui.sim.twin_load import LoadShape
from tui.twin.fit import serve


def server_identity(
    profile: Profile, flags: ServeFlags, server: RunRecord | None
) -> ProfileIdentity:
    """What is known of the server ``flags`` run on, in the profile's terms (unknown fields
    are the profile's own, so they never read as a difference)."""
    ident = profile.identity.model_copy(update={"model": flags.model})
    repro = server.repro if server is not None else None
    if repro is None:
        return ident
    update: dict[str, object] = {}
    if repro.vllm_version:  # a simulator too: the release it speaks
        update["vllm_version"] = repro.vllm_version.split("+")[0]
    simulated = (repro.gpu_name or "").endswith("(simulated)")  # the demo of this profile
    if repro.gpu_name and ident.device_kind == "gpu" and not simulated:
        update["device"] = repro.gpu_name
    return ident.model_copy(update=update)


def predict(
    profile: Profile, flags: ServeFlags, load: LoadSpec, server: RunRecord | None = None
) -> Prediction:
    """The twin's run of ``load`` on ``flags`` (``starts`` False with vLLM's reason).

    Each figure's interval, measured on loads the fit never saw, is
    :meth:`Prediction.interval` (``None``: that metric was not validated).

    Blocking (a few thousand virtual steps): run it in a thread. ``server``: the run
    watched now; what differs from the profile's server is carried in the label.
    """
    tc = twin_config(profile, flags)
    caveat = "; ".join(identity_mismatch(profile.identity, server_identity(profile, flags, server)))
    stated = profile.stated
    label = {
        "profile": profile.ref,
        "error_pct": stated.stated_pct,
        "error_source": stated.source,
        "kv_tokens": tc.kv_tokens,
        "caveat": caveat,
        "intervals": stated.metrics,
    }
    if tc.config is None:
        return Prediction(starts=False, failure=tc.failure, **label)  # type: ignore[arg-type]
    run = serve(tc.config, profile.coefficients, LoadShape.of(load), profile.frontend_blocks)
    return run.model_copy(update=label)
