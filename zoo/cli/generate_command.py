"""`zoo generate`: continue prompts with a causal language model, streaming its tokens.

    zoo generate "PROMPT" --model hf://gpt2 --max-new-tokens 50 --top-p 0.9 --seed 0
    printf 'one prompt\\nanother\\n' | zoo generate --model hf://distilgpt2

Each prompt (a TEXT argument, else a line of stdin, as `zoo translate` reads them) is written
to stdout, then its continuation piece by piece as the tokens come, then a line end. Greedy
unless a sampling flag is given (`--top-p`, `--top-k`, `--temperature`: a draw, repeatable
with `--seed`) or `--num-beams` above 1 (beam search, whose text comes at its end).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from zoo.recipes.checks import DECAY, POSITIVE, POSITIVE_INT, SEED, checked_type
from zoo.training.errors import UserError


def add_generate(sub: Any, subcommand: Any, model_help: str) -> None:
    """The `generate` subcommand's flags (`subcommand(sub, name, help)` makes the parser)."""
    p = subcommand(sub, "generate", "continue prompts with a language model (streamed)")
    p.add_argument("text", nargs="*", metavar="PROMPT",
                   help="prompts to continue; none: one per line from stdin")
    p.add_argument("--model", required=True, help=f"language model: {model_help}")
    p.add_argument("--max-new-tokens", type=checked_type(int, POSITIVE_INT), default=50,
                   help="most tokens generated per prompt (at most the model's positions "
                        "left after the prompt)")
    p.add_argument("--top-p", type=checked_type(float, DECAY), default=None,
                   help="nucleus sampling: draw among the most probable tokens holding this "
                        "much probability, in (0, 1]")
    p.add_argument("--top-k", type=checked_type(int, POSITIVE_INT), default=None,
                   help="draw among the k most probable tokens")
    p.add_argument("--temperature", type=checked_type(float, POSITIVE), default=None,
                   help="divide the logits before a draw (a finite number > 0)")
    p.add_argument("--num-beams", type=checked_type(int, POSITIVE_INT), default=1,
                   help="beam search of this many hypotheses (1: no beam search)")
    p.add_argument("--seed", type=checked_type(int, SEED), default=None,
                   help="makes a sampled run repeatable")
    p.add_argument("--repetition-penalty", type=checked_type(float, POSITIVE), default=1.0,
                   help="CTRL's penalty of tokens already written (1: none)")
    p.add_argument("--stop", action="append", default=[], metavar="STRING",
                   help="end a continuation after this string (repeatable)")
    p.set_defaults(func=cmd_generate)


def sampler_of(args: argparse.Namespace) -> Any:
    """The sampler the flags ask for."""
    from zoo.generation.samplers import (BeamSampler, GreedySampler, RandomSampler,
                                         TopKSampler, TopPSampler)

    temperature = 1.0 if args.temperature is None else args.temperature
    if args.num_beams > 1:
        if args.top_p is not None or args.top_k is not None or args.temperature is not None:
            raise UserError("--num-beams searches; it takes no --top-p, --top-k or "
                            "--temperature")
        return BeamSampler(num_beams=args.num_beams)
    if args.top_p is not None:
        return TopPSampler(p=args.top_p, k=args.top_k, temperature=temperature)
    if args.top_k is not None:
        return TopKSampler(k=args.top_k, temperature=temperature)
    if args.temperature is not None:
        return RandomSampler(temperature=temperature)
    return GreedySampler()


def cmd_generate(args: argparse.Namespace) -> int:
    """Writes each prompt and its streamed continuation, one prompt per line; returns 1 when
    some stdin lines were not UTF-8 (their lines are left empty, as `zoo translate` does)."""
    from zoo.cli.line_reader import argument_lines, stdin_lines
    from zoo.hub.loader import load
    from zoo.cli.stdout_faults import stdout_to_devnull
    from zoo.models.causal_lm.causal_lm import CausalLM

    sampler = sampler_of(args)
    model = load(args.model, expect=CausalLM)
    limit = model.backbone.max_positions - 1
    if args.max_new_tokens > limit:  # before any prompt is read
        raise UserError(f"--max-new-tokens must be at most {limit} (the model's positions "
                        f"less one for the prompt); got {args.max_new_tokens}")
    lines = argument_lines(args.text) if args.text else stdin_lines()[0]
    failed = 0
    try:
        for line in lines:
            if line.text is None:
                failed += 1
                print(f"zoo: warning: line {line.number}: {line.problem}", file=sys.stderr)
                sys.stdout.write("\n")
                continue
            _stream_one(model, line.text, sampler, args)
    except BrokenPipeError:
        stdout_to_devnull()
        return 141
    return 1 if failed else 0


def _stream_one(model: Any, prompt: str, sampler: Any, args: argparse.Namespace) -> None:
    try:
        pieces = model.stream(prompt, max_new_tokens=args.max_new_tokens, sampler=sampler,
                              seed=args.seed, stop_strings=args.stop,
                              repetition_penalty=args.repetition_penalty)
        sys.stdout.write(prompt)
        sys.stdout.flush()
        for piece in pieces:
            sys.stdout.write(piece)
            sys.stdout.flush()
    except UserError as error:
        if "max_new_tokens" in str(error):
            raise UserError(f"--max-new-tokens: {error}") from None
        raise
    sys.stdout.write("\n")
    sys.stdout.flush()
