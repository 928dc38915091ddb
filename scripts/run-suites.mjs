// Runs node:test suite files in the order given, N at a time, with the spec reporter: what
// `node --test --test-concurrency=N --test-timeout=MS files...` does, except that `node --test`
// sorts its file arguments by name, so a long file named late would start last and end the run
// alone. scripts/test.sh passes the longest files first.
//
//   node scripts/run-suites.mjs --concurrency=N --timeout=MS file...
//
// Exits 1 when any test or file fails, as `node --test` does. With --failures=FILE, each failed
// test's file, name and error (with the assertion's actual and expected values) are also written
// to FILE, so scripts/test.sh can print them last, where a log's tail shows them.
import { appendFileSync } from 'node:fs'
import { run } from 'node:test'
import { spec } from 'node:test/reporters'
import { inspect } from 'node:util'

const files = []
let concurrency = 1
let timeout = Infinity
let failures
for (const arg of process.argv.slice(2)) {
  const m = /^--(concurrency|timeout)=(\d+)$/.exec(arg)
  if (arg.startsWith('--failures=')) {
    failures = arg.slice('--failures='.length)
  } else if (m) {
    if (m[1] === 'concurrency') concurrency = Number(m[2])
    else timeout = Number(m[2])
  } else if (arg.startsWith('--')) {
    console.error(`run-suites: unknown option ${arg} (use --concurrency=N, --timeout=MS, --failures=FILE, then the files)`)
    process.exit(2)
  } else {
    files.push(arg)
  }
}
if (files.length === 0) {
  console.error('run-suites: no suite files given')
  process.exit(2)
}

const stream = run({ files, concurrency, timeout })
// The summary of the whole run (no file) says whether everything passed; a failed test also
// fails the run, as with `node --test`.
stream.on('test:summary', (data) => { if (data.file === undefined && !data.success) process.exitCode = 1 })
stream.on('test:fail', (data) => {
  process.exitCode = 1
  if (!failures) return
  // The error node:test reports wraps the test's own (its cause); a file that fails to load has
  // no test name but the file's.
  const error = data.details?.error
  const own = error?.cause ?? error
  const text = inspect(own, { depth: 4, breakLength: 120 }).split('\n').slice(0, 60).join('\n')
  appendFileSync(failures, `\n-- ${data.file ?? '(no file)'}: ${data.name}\n${text}\n`)
})
stream.compose(spec).pipe(process.stdout)
