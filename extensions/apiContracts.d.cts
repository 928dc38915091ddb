// Types of `@agimon-ai/po-sandbox/apiContracts` (CommonJS); apiContracts.d.mts re-exports them for ESM.

/** The shape of a Po API contract, as `defineApiContract` of `@agimon-ai/po-core` declares it. */
export interface ApiContract {
  version: 1
  protocols?: Record<string, string> | undefined
  schemas?: Record<string, boolean | object> | undefined
  http: {
    id: string
    scope: 'global' | 'session' | 'workspace'
    basePath?: string | undefined
    path: string
    method: 'DELETE' | 'GET' | 'HEAD' | 'OPTIONS' | 'PATCH' | 'POST' | 'PUT'
    description: string
    availability?: string | undefined
    authentication: 'device' | 'none' | 'owner'
    parameters?: { name: string; in: 'header' | 'path' | 'query'; required: boolean; schema: boolean | object }[] | undefined
    body?: { contentType: string; contentTypes?: string[] | undefined; required: boolean; schema: boolean | object } | undefined
    responses: Record<string, { description: string; contentType?: string | undefined; schema?: boolean | object | undefined; events?: Record<string, boolean | object> | undefined }>
  }[]
  sockets: {
    id: string
    scope: 'global' | 'session' | 'workspace'
    description: string
    availability?: string | undefined
    service: string
    member: string
    direction: 'client-to-server' | 'server-to-client'
    kind: 'channel' | 'method' | 'state'
    input: boolean | object
    output?: boolean | object | undefined
    errors?: boolean | object | undefined
  }[]
  dynamic: string[]
  gaps?: string[] | undefined
}

/** This facet contributes agent tools, commands or lifecycle only, with no separate HTTP or socket surface: `{ version: 1, http: [], sockets: [], dynamic: [] }` (frozen). */
export declare const apiContracts: Readonly<ApiContract>
export default apiContracts
