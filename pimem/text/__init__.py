"""What a message or a summary says: the readable text of a message (:mod:`~pimem.text.messages`),
a summary's template sections (:mod:`~pimem.text.sections`), the facts a text holds
(:mod:`~pimem.text.facts`) and tiktoken counts (:mod:`~pimem.text.tokenizers`)."""
