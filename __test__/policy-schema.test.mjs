// The policy file's JSON schema (docs/sandbox-policy.schema.json, shipped in the package): every
// policy example in the docs and every preset of `policy init` is valid by it and by the
// layer's own check (what a hub reads); files the layer refuses are refused by the schema too.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import Ajv2020 from 'ajv/dist/2020.js'
import YAML from 'yaml'

import { addon, require, root, tempDir } from './helpers.mjs'

const schema = JSON.parse(readFileSync(path.join(root, 'docs', 'sandbox-policy.schema.json'), 'utf8'))
const validate = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true }).compile(schema)

/** The layer's own check of `text` as a Po home's policy file. */
function layerCheck(t, text) {
  const home = tempDir(t, 'po-policy-schema-')
  writeFileSync(path.join(home, 'sandbox-policy.yaml'), text)
  return addon.sandboxPolicy({ command: 'check', poHome: home, env: {} })
}

/** The ```yaml blocks of the docs that are policy files (they set a policy key at the top). */
function docExamples() {
  const found = []
  for (const name of readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md'))) {
    const text = readFileSync(path.join(root, 'docs', name), 'utf8')
    for (const m of text.matchAll(/```yaml\n([\s\S]*?)```/g)) {
      if (/^(network|allow|resolve|workspaces|git):/m.test(m[1])) found.push({ where: name, text: m[1] })
    }
  }
  return found
}

test('every policy example in the docs and every preset is valid by the schema and by the layer', (t) => {
  const examples = docExamples()
  assert.ok(examples.length >= 1, 'the docs show a policy file')
  for (const preset of ['open', 'balanced', 'closed']) {
    const home = tempDir(t, 'po-policy-preset-')
    mkdirSync(home, { recursive: true })
    assert.equal(addon.sandboxPolicy({ command: 'init', preset, poHome: home, env: {} }).changed, true)
    examples.push({ where: `preset ${preset}`, text: readFileSync(path.join(home, 'sandbox-policy.yaml'), 'utf8') })
  }
  for (const { where, text } of examples) {
    const doc = YAML.parse(text)
    assert.ok(validate(doc), `${where}: ${JSON.stringify(validate.errors)}`)
    const checked = layerCheck(t, text)
    assert.equal(checked.ok, true, `${where}: ${checked.text}`)
  }
})

test('what the layer refuses, the schema refuses', (t) => {
  for (const text of [
    'network: closed\n',
    'alow: []\n',
    'allow:\n  - no-port.test\n',
    'allow:\n  - "a.test:0443"\n',
    'allow:\n  - "*.*.test:443"\n',
    'allow:\n  - "a b.test:443"\n',
    'resolve:\n  a.test: nowhere\n',
    'workspaces:\n  w:\n    deny: []\n',
    'workspaces:\n  ".hidden":\n    allow: []\n',
    'allow: registry.npmjs.org:443\n',
    'workspaceMode: copy\n',
    'runFlags: privileged\n',
    'runFlags:\n  - privileged\n',
    'guardedPaths: .git/hooks\n',
    'git:\n  hosts: github.com\n',
    'git:\n  hosts:\n    - Git.Test\n',
    'git:\n  hosts:\n    - "git.test=ftp://127.0.0.1:1"\n',
    'git:\n  hosts:\n    - "git.test=https://h/path"\n',
    'git:\n  pushes: []\n',
    'git:\n  push:\n    - repo: github.com/acme/*\n',
    'git:\n  push:\n    - repo: acme\n      refs: refs/heads/*\n',
    'git:\n  push:\n    - repo: github.com/acme/*\n      refs: heads/agent/*\n',
    'git:\n  push:\n    - repo: github.com/acme/*\n      refs: refs/heads/*\n      force: yes please\n',
  ]) {
    assert.equal(validate(YAML.parse(text)), false, `the schema took ${JSON.stringify(text)}`)
    assert.equal(layerCheck(t, text).ok, false, `the layer took ${JSON.stringify(text)}`)
  }
})

test('the schema ships in the package and is reachable by its export', () => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
  assert.ok(pkg.files.includes('docs/sandbox-policy.schema.json'))
  assert.deepEqual(require('@agimon-ai/po-sandbox/sandbox-policy.schema.json'), schema)
})
