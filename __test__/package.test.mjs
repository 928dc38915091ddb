// The package's shape: generated files match the exports, per-platform packages exist.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, existsSync } from 'node:fs'
import path from 'node:path'

import { createRequire } from 'node:module'

import { addon, root } from './helpers.mjs'

const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))

test('index.d.ts declares exactly what index.js exports', () => {
  const dts = readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const declared = [...dts.matchAll(/^export declare (?:function|class|const) (\w+)/gm)].map((m) => m[1]).sort()
  assert.deepEqual(Object.keys(addon).sort(), declared)
  for (const name of ['checkEngine', 'engineCandidates', 'doctor', 'DefaultSandboxExtensionService']) assert.ok(declared.includes(name), name)
})

test('package.json: name, engines, bin, files, license', () => {
  assert.equal(pkg.name, '@agimon-ai/po-sandbox')
  assert.equal(pkg.engines.node, '>= 24')
  assert.equal(pkg.license, 'MIT')
  for (const f of ['index.js', 'index.d.ts', 'bin/', 'extensions/']) assert.ok(pkg.files.includes(f), f)
  assert.ok(existsSync(path.join(root, 'LICENSE')))
  assert.match(readFileSync(path.join(root, 'LICENSE'), 'utf8'), /^MIT License/)
})

test('one npm package per prebuilt platform', () => {
  const triples = ['linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc']
  for (const triple of triples) {
    const p = JSON.parse(readFileSync(path.join(root, 'npm', triple, 'package.json'), 'utf8'))
    assert.equal(p.name, `@agimon-ai/po-sandbox-${triple}`)
    assert.equal(p.main, `po-sandbox.${triple}.node`)
    assert.equal(p.version, pkg.version)
  }
})

test('the addon loads without engine I/O', () => {
  // Loading already happened in helpers; a fresh load must not need an engine either.
  const started = process.hrtime.bigint()
  const fresh = createRequire(import.meta.url)(path.join(root, 'index.js'))
  assert.equal(typeof fresh.checkEngine, 'function')
  assert.ok(process.hrtime.bigint() - started >= 0n)
})
