"""The README names the two set-up commands, links to the site, and its example prints what its comments say
(tests/test_docs.py runs and type-checks every example of the README and the site)."""

from docs_examples import README, example


def test_readme_names_the_two_setup_commands():
    text = README.read_text()
    assert "pip install . && python -m kubevents" in text
    assert "pip install '.[test]' && pytest" in text


def test_readme_links_to_the_site_and_says_how_to_build_it():
    text = README.read_text()
    assert "](https://kubevents.github.io/kubevents/)" in text
    assert "pip install '.[docs]' && mkdocs build --strict" in text


def test_readme_example_prints_what_it_claims(capsys):
    example("README.md", "Broadcaster").run()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('Event(v1.ObjectReference{Kind:"Pod", Namespace:"prod", Name:"web-0"')
    assert out[0].endswith("reason: 'BackOff' Back-off restarting app")
    assert out[-2] == "3 Back-off restarting app ['create', 'patch', 'patch']"
    assert out[-1] == "1 2"
