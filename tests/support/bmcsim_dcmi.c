/*
 * DCMI "Get Power Reading" for OpenIPMI's ipmi_sim: test support for the harness, not product code.
 *
 * ipmi_sim emulates no DCMI (group extension 0xDC): `ipmitool dcmi power reading` gets
 * "Invalid command (c1)". tests/support/bmcsim.py builds this file into a module that ipmi_sim loads
 * (`loadlib "dcmi.so" "<power file>"` in lan.conf). It answers DCMI command 0x02 from the power
 * file, one line "instantaneous minimum maximum average period_s active(0|1)"; without that
 * file it answers d5 (not supported in present state). Response layout: DCMI 1.5, table 6-16.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <OpenIPMI/serv.h>
#include <OpenIPMI/mcserv.h>

static char power_file[4096];

static void put16(unsigned char *p, unsigned int v)
{
    p[0] = v & 0xff;
    p[1] = (v >> 8) & 0xff;
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

static void get_power_reading(lmc_data_t *mc, msg_t *msg, unsigned char *rdata,
                              unsigned int *rdata_len, void *cb_data)
{
    unsigned int cur, min, max, avg, period_s, active;
    FILE *f;

    (void) mc;
    (void) cb_data;
    if (msg->cmd != 0x02) {
        rdata[0] = 0xc1; /* invalid command: only Get Power Reading is emulated */
        *rdata_len = 1;
        return;
    }
    f = fopen(power_file, "r");
    if (!f || fscanf(f, "%u %u %u %u %u %u", &cur, &min, &max, &avg, &period_s, &active) != 6) {
        if (f)
            fclose(f);
        rdata[0] = 0xd5;
        *rdata_len = 1;
        return;
    }
    fclose(f);
    rdata[0] = 0x00;
    rdata[1] = 0xdc;
    put16(rdata + 2, cur);
    put16(rdata + 4, min);
    put16(rdata + 6, max);
    put16(rdata + 8, avg);
    put32(rdata + 10, (uint32_t) time(NULL));
    put32(rdata + 14, period_s * 1000u);
    rdata[18] = active ? 0x40 : 0x00; /* bit 6: power measurement active */
    *rdata_len = 19;
}

int ipmi_sim_module_init(sys_data_t *sys, const char *options)
{
    (void) sys;
    snprintf(power_file, sizeof(power_file), "%s", options ? options : "");
    ipmi_emu_register_group_extension_handler(0xdc, get_power_reading, NULL);
    return 0;
}
