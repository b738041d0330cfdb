"""``botpsy chat``: the assistant in a terminal, on a GGUF model over a device database on disk.

Interactive: type requests; the model's reasoning streams dimmed (``/think off`` hides it,
leaving a one-line note), answers stream as they are written, every tool call and its result
is shown, and a sensitive call (send, pay, delete, share, ...) waits for your y/n before it
runs. Commands: ``/tools``, ``/state``, ``/reset``, ``/stats``, ``/think on|off``, ``/help``, ``/quit``.

One-shot, for scripts: give the request as an argument. Sensitive calls are declined unless
``--yes``; ``--json`` prints every step record and the final answer as one JSON object.

``--mcp CMD`` adds the tools of an MCP server (started as a subprocess, stdio) to the device's;
their arguments are checked against their schemas and, unless the server marks them read-only
or non-destructive, they wait for your y/n like the device's sensitive tools
(``botpsy.mcp_tools.host``).

Examples::

    botpsy chat                                            # runs/speedrun/gguf/model-q4_k_m.gguf
    botpsy chat --model M.gguf --db device.sqlite "set an alarm for 7" --json
    botpsy chat --mcp "python notes_server.py"             # the device's tools and the server's
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from botpsy.agent.backends import open_backend
from botpsy.agent.loop import Agent, AgentConfig
from botpsy.agent.show import Style, format_call, format_result
from botpsy.agent.steps import STOP_REASONS, ConfirmationStep, FinalStep, ModelStep, Step, ToolStep, summarize
from botpsy.chat.stream import ContentDelta, ReasoningDelta
from botpsy.chat.types import ToolCall
from botpsy.output import emit, table
from botpsy.runtime.backend import BackendOptions, ModelLoadError, SamplingConfig
from botpsy.runtime.generate import CALL_THRESHOLD_HELP, LOOP_POLICIES, BudgetReached, Event, GenerateConfig, LoopDetected
from botpsy.runtime.prefix_cache import PREFIX_DIR_HELP, prefix_state_dir
from botpsy.world.registry import REGISTRY
from botpsy.world.world import World

HELP = """commands:
  /tools           the tools the assistant may call (* = asks you first)
  /state           the device's state (settings, and how many of each item)
  /reset           forget the conversation (the device keeps its state)
  /stats           tokens, time to first token, tokens/s, loop-guard events
  /think on|off    show or hide the model's reasoning
  /quit            leave (Ctrl-D too)"""


@dataclass
class ChatConfig:
    """Talk to the on-device assistant in the terminal, or run one request (--json for scripts)."""

    request: str | None = field(default=None, metadata={
        "help": "A one-shot request; without it the interactive assistant starts.", "positional": True})
    model: str = field(default="runs/speedrun/gguf/model-q4_k_m.gguf", metadata={
        "help": "GGUF file (llama.cpp), checkpoint folder (transformers) or http://.../v1 server."})
    db: str = field(default="runs/speedrun/device.sqlite", metadata={
        "help": "Device database; created and seeded if it does not exist."})
    seed: int = field(default=0, metadata={"help": "Seed of a newly created device database."})
    tools: list[str] = field(default_factory=list, metadata={"help": "Offer only this tool (default: all tools)."})
    mcp: list[str] = field(default_factory=list, metadata={
        "help": "Also offer the tools of this MCP server command (stdio), e.g. 'python notes_server.py'."})
    yes: bool = field(default=False, metadata={"help": "One-shot mode: approve sensitive calls (else declined)."})
    json: bool = field(default=False, metadata={"help": "One-shot mode: print the step records and answer as JSON."})
    think: bool = field(default=True, metadata={"help": "Show the model's reasoning as it streams (/think toggles)."})
    enable_thinking: bool = field(default=True, metadata={"help": "Let the model reason before it answers."})
    color: str = field(default="auto", metadata={"help": "ANSI colours.", "choices": ["auto", "always", "never"]})
    threads: int = field(default=0, metadata={"help": "CPU threads (0 = all physical cores)."})
    prefix_cache_dir: str = field(default="auto", metadata={"help": PREFIX_DIR_HELP})
    n_ctx: int = field(default=16384, metadata={"help": "Context size in tokens (all 60 tools take several thousand)."})
    max_tokens: int = field(default=1024, metadata={"help": "Most tokens per model turn."})
    thinking_budget: int = field(default=512, metadata={"help": "Close the reasoning after this many tokens (0 = off)."})
    token_budget: int = field(default=4096, metadata={"help": "Most generated tokens per request."})
    max_steps: int = field(default=8, metadata={"help": "Most model turns per request."})
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature (0 = greedy)."})
    sample_seed: int = field(default=0, metadata={"help": "Sampling seed."})
    constrain_calls: bool = field(default=True, metadata={"help": "Keep tool calls to the offered tools, their parameters and enum values (local backends; botpsy.chat.constrain)."})
    call_threshold: float = field(default=0.0, metadata={"help": CALL_THRESHOLD_HELP})
    on_loop: str = field(default="recover", metadata={
        "help": "What the loop guard does when the model repeats itself.", "choices": list(LOOP_POLICIES)})


def agent_config(config: ChatConfig) -> AgentConfig:
    sampling = SamplingConfig(temperature=config.temperature, seed=config.sample_seed)
    generation = GenerateConfig(max_tokens=config.max_tokens, sampling=sampling, on_loop=config.on_loop,
                                thinking_budget=config.thinking_budget, constrain_calls=config.constrain_calls,
                                call_threshold=config.call_threshold)
    return AgentConfig(max_steps=config.max_steps, token_budget=config.token_budget,
                       enable_thinking=config.enable_thinking, generation=generation)


def open_world(path: str, seed: int, tools: list[str]) -> World:
    """The device database (created and seeded if new); a clear error for a file that is not one."""
    unknown = sorted(set(tools) - set(REGISTRY))
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; see /tools in the chat for the list")
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        return World(path, seed=seed, offered=tools or None)
    except (sqlite3.DatabaseError, KeyError) as exc:
        raise ValueError(f"{path} is not a botpsy device database ({exc}); give another --db path") from None


# ---- what the terminal shows ---------------------------------------------------------------


class Display:
    """Streams one request's events and steps to a terminal."""

    def __init__(self, out: TextIO, style: Style, show_thinking: bool) -> None:
        self.out, self.style, self.show_thinking = out, style, show_thinking
        self.section: str | None = None  # "reasoning" | "hidden" | "answer" | None: what is being written
        self.at_line_start = True
        self.shown_call: str | None = None  # the call id a confirmation line already showed
        self.held = ""  # line breaks at the end of the reasoning so far

    def write(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        plain = text.replace(self.style.reset(), "") if self.style.color else text
        if plain:
            self.at_line_start = plain.endswith("\n")

    def _open(self, section: str | None) -> None:
        if self.section == section:
            return
        if self.section == "reasoning":
            self.write(self.style.reset())
            self.held = ""
        if not self.at_line_start:
            self.write("\n")
        if section == "reasoning":
            self.write(self.style.start_dim() + "thinking: ")
        elif section == "answer":
            self.write(self.style.bold("assistant: "))
        self.section = section

    def event(self, event: Event) -> None:
        if isinstance(event, ReasoningDelta) and not self.show_thinking:
            if self.section != "hidden" and event.text.strip():
                self._open("hidden")
                self.write(self.style.dim("(thinking... /think on shows it)"))
        elif isinstance(event, ReasoningDelta):
            text = event.text.lstrip("\n") if self.section != "reasoning" else self.held + event.text
            if text.strip():
                # Trailing line breaks wait for more reasoning, so the dimmed block ends on its last word.
                body = text.rstrip("\n")
                self.held = text[len(body):]
                self._open("reasoning")
                self.write(body)
            elif self.section == "reasoning":
                self.held = text
        elif isinstance(event, ContentDelta):
            text = event.text.lstrip("\n") if self.section != "answer" else event.text
            if text.strip() or self.section == "answer":
                self._open("answer")
                self.write(text)
        elif isinstance(event, LoopDetected):
            self.line(self.style.warn(f"[loop guard: {event.loop.kind} loop (period {event.loop.period}) in the "
                                      f"{event.where}; {event.action}]"))
        elif isinstance(event, BudgetReached):
            self.line(self.style.dim(f"[thinking budget reached at {event.reasoning_tokens} tokens]"))

    def line(self, text: str) -> None:
        self._open(None)
        self.write(text + "\n")

    def step(self, step: Step) -> None:
        style = self.style
        if isinstance(step, ModelStep):
            for error in step.parse_errors:
                self.line(style.warn(f"[format error: {error['kind']}; the model is told and retries]"))
            self._open(None)
        elif isinstance(step, ConfirmationStep):
            verdict = style.ok("[approved]") if step.approved else style.error("[declined]")
            if not step.asked:
                verdict = style.warn("[held: the assistant must ask you]")
            self.line("    " + style.call("-> " + format_call(step.name, step.arguments)) + " " + verdict)
            self.shown_call = step.call_id
        elif isinstance(step, ToolStep):
            if self.shown_call != step.call_id:
                self.line("    " + style.call("-> " + format_call(step.name, step.arguments)))
            result = format_result(step.result)
            self.line("    " + (style.error("<- " + result) if step.error else style.dim("<- ") + result))
        elif isinstance(step, FinalStep) and step.stop_reason != "answer":
            self.line(style.warn(f"[stopped: {STOP_REASONS[step.stop_reason]}"
                                 f"{'; ' + step.detail if step.detail else ''}]"))


def ask_user(prompt: str, read: Callable[[str], str] = input) -> bool:
    """y/n from the person at the terminal; anything but yes (or end of input) is no."""
    try:
        return read(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


# ---- the interactive session ---------------------------------------------------------------


class ChatSession:
    """Reads requests and commands, runs the agent, shows what happens."""

    def __init__(self, agent: Agent, display: Display, read: Callable[[str], str] = input) -> None:
        self.agent, self.display, self.read = agent, display, read
        self.history: list[Step] = []  # every step this session, across /reset
        agent.on_event = display.event
        agent.confirm = self.confirm
        self.prepared: dict[str, Any] | None = None  # how the tools prefix was made ready (Agent.prepare)
        self._preparing: threading.Thread | None = None
        self._cancel = threading.Event()

    def prepare_in_background(self) -> None:
        """Evaluate (or read back from disk) the tools prefix while the person types the first request.

        Only this thread touches the model until ``ask`` or the end of the session joins it; a
        failure here only means the first turn prefills the tools itself.
        """
        def work() -> None:
            try:
                self.prepared = self.agent.prepare(self._cancel)
            except Exception as exc:  # noqa: BLE001 - any failure falls back to prefilling in the turn
                self.prepared = {"source": "failed", "error": str(exc)}

        self._preparing = threading.Thread(target=work, name="botpsy-prepare", daemon=True)
        self._preparing.start()

    def wait_prepared(self, cancel: bool = False) -> None:
        """Wait for the preparation thread. ``cancel``: stop it at its next batch first, and let no
        Ctrl-C cut the wait short, since the model is closed next and must not be closed under it."""
        if self._preparing is None:
            return
        if cancel:
            self._cancel.set()
        while self._preparing.is_alive():
            try:
                self._preparing.join()
            except KeyboardInterrupt:
                if not cancel:
                    raise  # the first request's wait: Ctrl-C interrupts that request, as usual
        self._preparing = None

    def confirm(self, call: ToolCall) -> bool:
        self.display.line(self.display.style.warn(f"{call.name} is a sensitive action: "
                                                  f"{format_call(call.name, call.arguments)}"))
        return ask_user("allow it? [y/N] ", self.read)

    def ask(self, request: str) -> None:
        self.wait_prepared()
        for step in self.agent.run(request):
            self.history.append(step)
            self.display.step(step)

    def command(self, line: str) -> bool:
        """Run a /command; False means quit."""
        name, _, argument = line[1:].strip().partition(" ")
        show = self.display.line
        if name in ("quit", "exit", "q"):
            return False
        if name == "think" and argument.strip() in ("on", "off"):
            self.display.show_thinking = argument.strip() == "on"
            show(f"reasoning is {'shown' if self.display.show_thinking else 'hidden'}")
        elif name == "tools":
            show(tools_text(self.agent.tools, self.agent.world.is_sensitive))
        elif name == "state":
            show(state_text(self.agent.world))
        elif name == "reset":
            self.agent.reset()
            show("conversation cleared; the device keeps its state")
        elif name == "stats":
            show(stats_text(self.history))
            if self.prepared and self.prepared.get("source") != "none":
                show(prepared_text(self.prepared))
        else:
            show(HELP)
        return True

    def loop(self) -> None:
        try:
            self._loop()
        finally:
            self.wait_prepared(cancel=True)  # the model is closed after this; the thread must be done with it

    def _loop(self) -> None:
        while True:
            try:
                line = self.read("you> ").strip()
            except EOFError:
                self.display.write("\n")
                return
            except KeyboardInterrupt:
                self.display.write("\n")
                continue
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    return
                continue
            try:
                self.ask(line)
            except KeyboardInterrupt:  # stops this request only; the conversation stays usable
                self.display.line(self.display.style.warn("[interrupted]"))


def tools_text(tools: list[dict], is_sensitive: Callable[[str], bool] = World.is_sensitive) -> str:
    lines = []
    for tool in tools:
        fn = tool["function"]
        mark = "*" if is_sensitive(fn["name"]) else " "
        lines.append(f"{mark} {fn['name']:<28} {fn.get('description', '').split('. ')[0]}")
    return "\n".join(lines)


def state_text(world: World) -> str:
    snapshot = world.snapshot()
    settings = ", ".join(f"{key}={row['value']}" for key, row in snapshot.get("settings", {}).items())
    counts = ", ".join(f"{table_name}: {len(rows)}" for table_name, rows in snapshot.items() if table_name != "settings")
    pending = world.user.pending()
    text = f"settings: {settings}\nitems: {counts}"
    if pending:
        text += "\npending confirmations: " + ", ".join(p["name"] for p in pending)
    return text


def prepared_text(prepared: dict[str, Any]) -> str:
    """One line on how the tools prefix was made ready before the first request."""
    if prepared.get("source") == "failed":
        return f"tools prefix: not prepared ({prepared.get('error', '')}); the first turn prefilled it"
    how = {"memory": "restored from memory", "disk": "read back from disk", "prefilled": "prefilled",
           "cancelled": "cancelled"}[prepared["source"]]
    return f"tools prefix: {prepared['tokens']} tokens, {how} in {prepared['ms']:.0f} ms before the first request"


def stats_text(steps: list[Step]) -> str:
    stats = summarize(steps)
    rows = [{"what": key, "value": value} for key, value in stats.items()]
    return table(rows, ["what", "value"])


# ---- main ----------------------------------------------------------------------------------


def one_shot(agent: Agent, config: ChatConfig, display: Display | None) -> dict[str, Any]:
    """Run ``config.request``; sensitive calls follow ``--yes``. Returns the JSON record."""
    agent.confirm = lambda call: config.yes
    if display is not None:
        agent.on_event = display.event
    steps = []
    for step in agent.run(config.request or ""):
        steps.append(step)
        if display is not None:
            display.step(step)
    final = steps[-1]
    assert isinstance(final, FinalStep)
    return {"request": config.request, "model": config.model, "db": config.db,
            "sensitive_calls": "approved" if config.yes else "declined", "answer": final.answer,
            "stop_reason": final.stop_reason, "stats": summarize(steps), "steps": [s.to_dict() for s in steps]}


def banner(agent: Agent, config: ChatConfig, style: Style) -> str:
    memory = getattr(agent.backend, "memory", None)
    size = f" ({memory.describe()})" if memory is not None else ""
    return (style.bold("botpsy chat") + f": {config.model}{size}\n"
            + style.dim(f"device {config.db} ({agent.world.owner}, {agent.world.city}); {len(agent.tools)} tools; "
                        "/help for commands"))


def with_mcp_tools(world: World, commands: list[str]):
    """The world plus the tools of each MCP server command, under the world's rules (``ToolHost``)."""
    from botpsy.mcp_tools.client import McpToolSource
    from botpsy.mcp_tools.host import ToolHost

    sources = []
    try:
        for command in commands:
            sources.append(McpToolSource(command))
        return ToolHost(world, sources)
    except BaseException:
        for source in sources:
            source.close()
        raise


def main(config: ChatConfig) -> int:
    if config.json and config.request is None:
        raise ValueError("--json needs a request to run (one-shot mode)")
    settings = agent_config(config)  # bad generation flags fail before the model loads
    try:
        options = BackendOptions(threads=config.threads, n_ctx=config.n_ctx,
                                 prefix_cache_dir=prefix_state_dir(config.prefix_cache_dir))
        backend = open_backend(config.model, options)
    except ModelLoadError as exc:
        print(f"botpsy chat: {exc}", file=sys.stderr)
        return 2
    world = open_world(config.db, config.seed, config.tools)
    try:
        if config.mcp:
            world = with_mcp_tools(world, config.mcp)
        tools = world.tool_specs(config.tools or None) if not config.mcp else world.tool_specs()
        agent = Agent(backend, world, settings, tools=tools)
        color = config.color == "always" or (config.color == "auto" and sys.stdout.isatty())
        style = Style(color=color)
        if config.request is not None:
            display = None if config.json else Display(sys.stdout, style, config.think)
            record = one_shot(agent, config, display)
            if config.json:
                emit(record, True)
            return 0
        print(banner(agent, config, style))
        try:
            import readline  # noqa: F401  (line editing and history for input())
        except ImportError:
            pass
        session = ChatSession(agent, Display(sys.stdout, style, config.think))
        session.prepare_in_background()
        session.loop()
        return 0
    finally:
        world.close()
        backend.close()
