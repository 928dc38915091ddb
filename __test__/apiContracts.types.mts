// Compiled by `npm run typecheck`: the `./apiContracts` subpath's ESM types (the package's
// `import` condition and extensions/apiContracts.d.mts apply).
import apiContractsDefault, { apiContracts, type ApiContract } from '@agimon-ai/po-sandbox/apiContracts'

const named: Readonly<ApiContract> = apiContracts
const byDefault: Readonly<ApiContract> = apiContractsDefault
const version: 1 = named.version
const sockets: readonly ApiContract['sockets'][number][] = byDefault.sockets
export { version, sockets }
