--[[
burst_buffer.lua: sluice as the burst buffer of Slurm's burst_buffer/lua
plugin (slurm.conf: BurstBufferType=burst_buffer/lua; this file beside
slurm.conf). Every hook runs `sluice bb STAGE` (docs/bbos.md, "Slurm").

Job scripts ask with directives (burst_buffer.conf Directive=, default
BB_LUA):
  #BB_LUA capacity=20G pool=mem [period=1h] [access=striped|private] [app=NAME] [checkpoint=GLOB]
  #BB_LUA stage_in source=/sluice/in/data [destination=NAME]
  #BB_LUA stage_out source=NAME destination=/sluice/out/NAME
and find their buffer directory in $SLUICE_BB.

Configuration: a file of KEY=VALUE lines, named by $SLUICE_BB_CONF in
slurmctld's environment or /etc/sluice/slurm.conf:
  SLUICE=/usr/local/bin/sluice   the binary
  MOUNT=/sluice                  where sluice is mounted on this node
  META=host:port                 the metadata service (or DIR=state dir)
  SECRET_FILE=/etc/sluice/secret the cluster secret
  DIRECTIVE=BB_LUA
  GRANT_WAIT=0s                  how long setup waits for the grant policy

Hooks of Slurm 22.05 plus slurm_bb_test_data_in/out of later versions;
arguments beyond the ones used here (later versions add job_info) are
ignored. job_process, pools and paths run inside slurmctld and must be
quick: they start one `sluice` that only parses or asks the metadata
service once.
--]]

lua_script_name = "burst_buffer.lua"

local function read_conf()
	local path = os.getenv("SLUICE_BB_CONF") or "/etc/sluice/slurm.conf"
	local conf = { SLUICE = "sluice", DIRECTIVE = "BB_LUA" }
	local f = io.open(path, "r")
	if f == nil then
		return conf
	end
	for line in f:lines() do
		local k, v = string.match(line, "^%s*([%w_]+)%s*=%s*(.-)%s*$")
		if k ~= nil then
			conf[k] = v
		end
	end
	f:close()
	return conf
end

local conf = read_conf()

local function quote(s)
	return "'" .. string.gsub(tostring(s), "'", "'\\''") .. "'"
end

-- sluice runs `sluice bb STAGE` with the cluster flags and args and
-- returns slurm.SUCCESS or slurm.ERROR, and what it printed.
local function sluice(stage, args)
	local cmd = quote(conf.SLUICE) .. " bb " .. stage
	local flags = { META = "meta", DIR = "dir", SECRET_FILE = "secret-file", MOUNT = "mount", DIRECTIVE = "directive" }
	for key, flag in pairs(flags) do
		if conf[key] ~= nil then
			cmd = cmd .. " --" .. flag .. " " .. quote(conf[key])
		end
	end
	for k, v in pairs(args or {}) do
		cmd = cmd .. " --" .. k .. "=" .. quote(v)
	end
	-- Lua 5.1 (Slurm 22.05) does not return a pipe's exit status: print it
	local p = io.popen(cmd .. " 2>&1; echo \"sluice-rc=$?\"")
	local out = p:read("*a")
	p:close()
	local rc = tonumber(string.match(out, "sluice%-rc=(%d+)%s*$"))
	out = string.gsub(out, "sluice%-rc=%d+%s*$", "")
	if rc == 0 then
		return slurm.SUCCESS, out
	end
	slurm.log_error("%s: sluice bb %s failed: %s", lua_script_name, stage, out)
	return slurm.ERROR, out
end

function slurm_bb_job_process(job_script, uid, gid)
	return sluice("job-process", { script = job_script, uid = uid, gid = gid })
end

function slurm_bb_pools()
	return sluice("pools", {})
end

function slurm_bb_job_teardown(job_id, job_script, hurry, uid, gid)
	local args = { job = job_id, script = job_script }
	if hurry == "true" then
		args.hurry = "true"
	end
	return sluice("teardown", args)
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
	return sluice("setup", { job = job_id, uid = uid, gid = gid, script = job_script, wait = conf.GRANT_WAIT or "0s" })
end

function slurm_bb_data_in(job_id, job_script, uid, gid)
	return sluice("data-in", { job = job_id, script = job_script, uid = uid, gid = gid })
end

-- later versions poll these after data_in/data_out; ours finish inside them
function slurm_bb_test_data_in(job_id, job_script)
	return slurm.SUCCESS, "yes"
end

function slurm_bb_test_data_out(job_id, job_script)
	return slurm.SUCCESS, "yes"
end

function slurm_bb_real_size(job_id, uid, gid)
	return slurm.SUCCESS
end

function slurm_bb_paths(job_id, job_script, path_file, uid, gid)
	return sluice("paths", { job = job_id, script = job_script, ["path-file"] = path_file })
end

-- job_nodes returns the job's nodes, comma-separated (22.05 passes no
-- job_info to pre_run: ask scontrol)
local function job_nodes(job_id)
	local p = io.popen("scontrol show job -o " .. quote(job_id) .. " 2>/dev/null")
	local info = p:read("*a")
	p:close()
	local list = string.match(info, " NodeList=(%S+)")
	if list == nil or list == "(null)" then
		return ""
	end
	p = io.popen("scontrol show hostnames " .. quote(list) .. " 2>/dev/null")
	local names = {}
	for name in p:lines() do
		table.insert(names, name)
	end
	p:close()
	return table.concat(names, ",")
end

function slurm_bb_pre_run(job_id, job_script, uid, gid)
	return sluice("pre-run", { job = job_id, script = job_script, uid = uid, gid = gid, nodes = job_nodes(job_id) })
end

function slurm_bb_post_run(job_id, job_script, uid, gid)
	return sluice("post-run", { job = job_id, script = job_script })
end

function slurm_bb_data_out(job_id, job_script, uid, gid)
	return sluice("data-out", { job = job_id, script = job_script, uid = uid, gid = gid })
end

function slurm_bb_get_status(uid, gid, ...)
	return sluice("status", {})
end
