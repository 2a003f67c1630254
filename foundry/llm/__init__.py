"""The LLM as mutation operator: an OpenAI-compatible client with budgets and retries,
prompt building, reply parsing, the `LLMProposer`, and prompt evolution."""

from foundry.config_keys import ConfigError
from foundry.llm.accounting import LLMCallRecord
from foundry.llm.budget import Budget, BudgetExhausted
from foundry.llm.client import LLMClient, LLMReply
from foundry.llm.config import BudgetConfig, EnsembleMember, LLMConfig, ModelPrice
from foundry.llm.evolution_config import PromptEvolutionConfig
from foundry.llm.parsing import ParsedReply, parse_reply
from foundry.llm.prompt_builder import build_messages
from foundry.llm.prompt_evolution import EditOutcome, PromptPopulation, PromptVariant
from foundry.llm.proposer import LLMProposer, make_proposer

__all__ = [
    "Budget", "BudgetConfig", "BudgetExhausted", "ConfigError", "EditOutcome", "EnsembleMember",
    "LLMCallRecord", "LLMClient", "LLMConfig", "LLMProposer", "LLMReply", "ModelPrice",
    "ParsedReply", "PromptEvolutionConfig", "PromptPopulation", "PromptVariant",
    "build_messages", "make_proposer", "parse_reply",
]
