"""The prefilter stage: a file's bytes in, the parts of it worth parsing out.

`candidates` finds where the enabled rules' trigger words occur and cuts the file down to the statements around
them (every line and column kept where it was); `screens` are the rules' cheap text tests that drop an occurrence
no rule can flag. Nothing here parses more than those statements, and nothing here knows a rule by name: each rule
declares its own trigger words and screen.
"""
