-- End-to-end test of the Neovim plugin in a real, headless Neovim:
--   nvim --clean --headless -l tests/editors/nvim_e2e.lua PLUGIN_DIR SERVER FIXTURE WORKDIR
-- The plugin goes on the runtimepath and is enabled the 0.11 way (`vim.lsp.enable`). Opens a copy
-- of FIXTURE (whose hazard lines end in `# IPxxx` or `# expect: IPxxx`), waits for diagnostics and
-- compares their codes and lines with those comments, applies the preferred quickfix of the first
-- fixable finding and checks the new line and that its diagnostic goes away, and checks that hover
-- quotes the runtime message. Prints one line per check; exits 1 on the first failure.
-- (With -l, `print` writes to stderr.)

local plugin_dir, server, fixture, workdir = arg[1], arg[2], arg[3], arg[4]
local TIMEOUT = tonumber(os.getenv('INPLACE_EDITOR_TIMEOUT_MS') or '30000')

local function fail(msg)
  io.stderr:write('nvim-e2e: FAIL: ' .. msg .. '\n')
  os.exit(1)
end

local function ok(msg)
  io.stderr:write('nvim-e2e: ok: ' .. msg .. '\n')
end

if not (plugin_dir and server and fixture and workdir) then
  fail('usage: nvim --clean --headless -l nvim_e2e.lua PLUGIN_DIR SERVER FIXTURE WORKDIR')
end

vim.g.loaded_python3_provider = 0
vim.opt.runtimepath:prepend(plugin_dir)
vim.cmd('filetype plugin on')

-- What the fixture says the diagnostics must be.
local expected = {}
local n = 0
for line in io.lines(fixture) do
  n = n + 1
  local code = line:match('#%s*expect:%s*(IP%d%d%d)') or line:match('#%s*(IP%d%d%d)')
  if code then
    table.insert(expected, ('%d:%s'):format(n, code))
  end
end
if #expected == 0 then
  fail(fixture .. ' has no `# IPxxx` comments')
end

-- Work on a copy, in a directory of its own (the project root).
vim.fn.mkdir(workdir, 'p')
local copy = workdir .. '/' .. vim.fs.basename(fixture)
vim.fn.writefile(vim.fn.readfile(fixture, 'b'), copy, 'b')

-- INPLACE_NVIM_MODE: `enable` (0.11+: lsp/inplace_lsp.lua + vim.lsp.enable), `setup`
-- (require('inplace_lsp').setup) or `legacy` (setup's Neovim 0.10 path, vim.lsp.start).
local mode = os.getenv('INPLACE_NVIM_MODE') or 'enable'
local exited
local function on_exit(code, signal)
  exited = ('exit code %d, signal %d'):format(code, signal)
end
if mode == 'enable' then
  vim.lsp.config('inplace_lsp', { cmd = { server, 'server' }, on_exit = on_exit })
  vim.lsp.enable('inplace_lsp')
elseif mode == 'setup' or mode == 'legacy' then
  require('inplace_lsp').setup({ cmd = { server, 'server' }, on_exit = on_exit, legacy = mode == 'legacy' })
else
  fail('unknown INPLACE_NVIM_MODE ' .. mode)
end
ok('mode: ' .. mode)
vim.cmd.edit(vim.fn.fnameescape(copy))
local buf = vim.api.nvim_get_current_buf()
if vim.bo[buf].filetype ~= 'python' then
  fail('filetype is ' .. vim.bo[buf].filetype .. ', not python')
end

local client
if not vim.wait(TIMEOUT, function()
  if exited then
    fail(('the server %s exited before initializing (%s)'):format(server, exited))
  end
  client = vim.lsp.get_clients({ bufnr = buf, name = 'inplace_lsp' })[1]
  return client ~= nil and client.initialized
end, 20) then
  fail(('the server %s did not start and initialize within %d ms'):format(server, TIMEOUT))
end
ok('server attached: ' .. client.name)

local function got()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(out, ('%d:%s'):format(d.lnum + 1, d.code))
  end
  table.sort(out)
  return out
end
table.sort(expected)
local want = table.concat(expected, ' ')
if not vim.wait(TIMEOUT, function()
  if exited or client:is_stopped() then
    fail('the server stopped before publishing diagnostics (' .. (exited or 'stopped') .. ')')
  end
  return table.concat(got(), ' ') == want
end, 20) then
  fail(('diagnostics: want [%s], got [%s]'):format(want, table.concat(got(), ' ')))
end
ok(('diagnostics match the fixture: %d findings [%s]'):format(#expected, want))

-- The finding to fix (IP301 unless INPLACE_NVIM_FIX_CODE says otherwise); code actions are
-- asked with the raw LSP diagnostic as context, as a real client does.
local fix_code = os.getenv('INPLACE_NVIM_FIX_CODE') or 'IP301'
local target
for _, d in ipairs(vim.diagnostic.get(buf)) do
  if d.code == fix_code then
    target = d
    break
  end
end
if target == nil then
  fail('no ' .. fix_code .. ' diagnostic to fix')
end
local params = {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  range = target.user_data.lsp.range,
  context = { diagnostics = { target.user_data.lsp }, only = { 'quickfix' } },
}
local resp = client:request_sync('textDocument/codeAction', params, TIMEOUT, buf)
if not resp or resp.err then
  fail('codeAction: ' .. vim.inspect(resp))
end
local actions = resp.result or {}
local action
for _, a in ipairs(actions) do
  if a.kind == 'quickfix' and a.edit and (action == nil or (a.isPreferred and not action.isPreferred)) then
    action = a
  end
end
if action == nil then
  fail(('no quickfix with an edit for %s on line %d: %s'):format(target.code, target.lnum + 1, vim.inspect(actions)))
end
ok(('quickfix for %s on line %d: %s'):format(target.code, target.lnum + 1, action.title))

-- Apply it, and check the text against the edit the server sent.
local before = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
local after = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
local changed = {}
for i = 1, math.max(#before, #after) do
  if before[i] ~= after[i] then
    table.insert(changed, ('%d: %s'):format(i, after[i] or '<gone>'))
  end
end
if #changed == 0 then
  fail('applying the quickfix changed nothing')
end
-- The fixed line must hold this text (default: the IP301 fix of the demo file).
local want_text = os.getenv('INPLACE_NVIM_FIXED_TEXT') or 'y = y + 1'
local line_now = after[target.lnum + 1] or ''
if not line_now:find(want_text, 1, true) then
  fail(('after the quickfix line %d reads %q, without %q; changed: %s'):format(
    target.lnum + 1, line_now, want_text, table.concat(changed, ' | ')))
end
ok('buffer after the quickfix: ' .. table.concat(changed, ' | '))

local fixed_line, fixed_code = target.lnum, target.code
if not vim.wait(TIMEOUT, function()
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.lnum == fixed_line and d.code == fixed_code then
      return false
    end
  end
  return #vim.diagnostic.get(buf) == #expected - 1
end, 20) then
  fail(('%s on line %d is still reported after the fix: [%s]'):format(fixed_code, fixed_line + 1, table.concat(got(), ' ')))
end
ok(('%s is gone after the fix; %d findings left'):format(fixed_code, #vim.diagnostic.get(buf)))

-- Hover on a remaining form-3 finding quotes the runtime message.
local hover_on
for _, d in ipairs(vim.diagnostic.get(buf)) do
  if d.code == 'IP302' or d.code == 'IP301' then
    hover_on = d
    break
  end
end
if hover_on == nil then
  fail('no IP301/IP302 finding left to hover')
end
local hresp = client:request_sync('textDocument/hover', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  position = { line = hover_on.lnum, character = hover_on.user_data.lsp.range.start.character },
}, TIMEOUT, buf)
if not hresp or hresp.err or not hresp.result then
  fail('hover: ' .. vim.inspect(hresp))
end
local contents = hresp.result.contents
local text = type(contents) == 'table' and (contents.value or vim.inspect(contents)) or tostring(contents)
local runtime = 'one of the variables needed for gradient computation has been modified by an inplace operation'
if not text:find(runtime, 1, true) then
  fail('hover does not quote the runtime message: ' .. text)
end
ok(('hover on line %d quotes the runtime message'):format(hover_on.lnum + 1))

vim.lsp.stop_client(client.id)
io.stderr:write('nvim-e2e: all checks passed\n')
os.exit(0)
