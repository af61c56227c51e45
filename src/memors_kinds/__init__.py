"""The five built-in work-item kinds, each a pluggy plugin module.

They are registered through the ``memors.kinds`` entry-point group, exactly
as a third party's kind would be; core never imports them by name.
"""
