"""Thin Ray actors over logic that is tested without Ray: islands, evaluators, the
prompt evolver, and the dispatcher that balances candidates over evaluators."""
