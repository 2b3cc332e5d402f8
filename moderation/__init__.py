"""The moderation flow: what happens to a valid request, free of HTTP and of Ray."""
