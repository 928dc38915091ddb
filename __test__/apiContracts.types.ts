// Compiled by `npm run typecheck`: the `./apiContracts` subpath's CommonJS types (this file is
// CommonJS under nodenext, so the package's `require` condition and extensions/apiContracts.d.cts apply).
import contracts = require('@agimon-ai/po-sandbox/apiContracts')
import type { ApiContract } from '@agimon-ai/po-sandbox/apiContracts'

const named: Readonly<ApiContract> = contracts.apiContracts
const byDefault: Readonly<ApiContract> = contracts.default
const version: 1 = named.version
const http: readonly ApiContract['http'][number][] = byDefault.http
const dynamic: readonly string[] = named.dynamic
// @ts-expect-error the contract is read-only
contracts.apiContracts.version = 1
export { version, http, dynamic }
