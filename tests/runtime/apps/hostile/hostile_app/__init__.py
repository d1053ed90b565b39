"""A MiniApp whose tools each try one escape from the sandbox and report what happened."""
