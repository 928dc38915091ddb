// Runs node:test suite files in the order given, N at a time, with the spec reporter: what
// `node --test --test-concurrency=N --test-timeout=MS files...` does, except that `node --test`
// sorts its file arguments by name, so a long file named late would start last and end the run
// alone. scripts/test.sh passes the longest files first.
//
//   node scripts/run-suites.mjs --concurrency=N --timeout=MS file...
//
// Exits 1 when any test or file fails, as `node --test` does.
import { run } from 'node:test'
import { spec } from 'node:test/reporters'

const files = []
let concurrency = 1
let timeout = Infinity
for (const arg of process.argv.slice(2)) {
  const m = /^--(concurrency|timeout)=(\d+)$/.exec(arg)
  if (m) {
    if (m[1] === 'concurrency') concurrency = Number(m[2])
    else timeout = Number(m[2])
  } else if (arg.startsWith('--')) {
    console.error(`run-suites: unknown option ${arg} (use --concurrency=N, --timeout=MS, then the files)`)
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
stream.on('test:fail', () => { process.exitCode = 1 })
stream.compose(spec).pipe(process.stdout)
