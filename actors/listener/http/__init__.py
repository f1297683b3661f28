"""The HTTP front: streamable HTTP of both protocol eras, served by hypercorn's trio worker."""
