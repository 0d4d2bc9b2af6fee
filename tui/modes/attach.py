"""Attach: watch and load a server at a URL that this console did not start.

Nothing is launched or stopped. The GPU panel shows what can truly be attributed to that
server: DCGM gauges at ``--gpu-metrics-url``; else the server's own /metrics page when it
carries DCGM gauges (the simulator's does), picked up by itself; else local NVML, only
when the URL is on this machine. Otherwise the panel says the remote GPU is not visible
(and the flag to pass), and the run records no GPU numbers: this machine's GPU is never
reported as the server's.
"""

from __future__ import annotations

import os

from tui.domain.credentials import Credentials
from tui.domain.flags.serve import ServeFlags
from tui.domain.url_credentials import split_url
from tui.load.process import ProcessLoadRunner
from tui.modes import adapters
from tui.modes.common import Services, assemble, open_history, starting_point
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.sources import HostReader, MetricsReader, local_client
from tui.server.attached import AttachedServer, attach_url
from tui.server.attached_config import AttachedConfigReader
from tui.session.facade import Session
from tui.session.port import SessionInfo
from tui.session.slot import ServerSlot
from tui.store.console_files import ConsoleFiles
from tui.store.history import default_data_dir, history_file
from tui.telemetry.locality import is_local_url

ATTACHED_FORM_MODEL = "attached"
NO_FLAG_LIST = "attached: no flag list (this console does not launch vLLM)"


class AttachMode:
    """Builds a session that watches the server at ``--attach URL``."""

    label = "attach"

    def build(self, options: ConsoleOptions) -> Session:
        """The attached session for ``options``; raises :class:`SetupError` for a bad URL."""
        info, services = self.parts(options)
        return assemble(info, services, poll_interval_s=options.poll_interval_s)

    def parts(self, options: ConsoleOptions) -> tuple[SessionInfo, Services]:
        """What :meth:`build` joins: the session's facts and the adapters it chose."""
        if options.demo:
            raise SetupError("--attach watches a server at a URL", hint="drop --demo")
        assert options.attach is not None
        # user:password out of the URL first: only the clean URL is shown, stored, logged.
        _, url_credential = split_url(options.attach)
        try:
            url = attach_url(options.attach)
        except ValueError as exc:
            raise SetupError(str(exc)) from exc
        data_dir = options.data_dir or default_data_dir()
        env = dict(os.environ)
        said: list[str] = []
        store, history = open_history(history_file(data_dir), said)
        point = starting_point(options, fallback=ServeFlags(model=ATTACHED_FORM_MODEL))
        credentials = Credentials.from_env(env, command_line=point.secrets)
        local = is_local_url(url)
        gpu = adapters.gpu_source(metrics_url=options.gpu_metrics_url, attached_url=url)
        services = Services(
            store=store,
            history=history,
            slot=ServerSlot(
                existing=AttachedServer(
                    url,
                    api_key=credentials.api_key,
                    poll_interval_s=options.poll_interval_s,
                    config_reader=AttachedConfigReader(
                        lambda: local_client(credentials, url_credential=url_credential),
                        log_path=options.attach_log,
                    ),
                    credential=url_credential,
                )
            ),
            metrics=MetricsReader(local_client(credentials, url_credential=url_credential)),
            runner=ProcessLoadRunner(api_key=credentials.api_key, credential=url_credential),
            gpu=gpu.reader,
            host=HostReader() if local else None,
            gpu_policy=gpu.policy,
            files=ConsoleFiles(data_dir),
            twin=True,
            twin_profile=options.sim_profile,
            twin_design=(options.calibration_scale, options.calibration_passes),
            twin_runner=lambda: ProcessLoadRunner(
                api_key=credentials.api_key, credential=url_credential
            ),
        )
        info = SessionInfo(
            label=f"attached: {url}",
            initial_flags=point.flags,
            initial_load=point.load,
            presets=point.presets,
            initial_preset=point.preset.name if point.preset is not None else None,
            notices=[*said, *point.notices],
            executable=url,
            no_flag_list=NO_FLAG_LIST,
        )
        return info, services
