# The Jinja engine (jinja/): values, JSON and Python printing (test_jinja_values), the template
# language against jinja2 in transformers' environment (test_jinja: tests/fixtures/jinja, made by
# tools/make_jinja_fixtures.py), the released chat templates in ../shared/templates (skipped
# where it is absent).
mt_test_binary(test_jinja_values jinja/jinja_values.c)
mt_test_cases(test_jinja_values
  jinja_values_json jinja_values_print jinja_values_unicode jinja_values_heap)
mt_test_binary(test_jinja jinja/jinja.c)
mt_test_cases(test_jinja jinja_cases jinja_templates jinja_limits)
